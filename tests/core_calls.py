"""Calls straight into libcore through hl._core.lib with NULL pointers, invalid op codes,
invalid dtype codes and absent devices: each must come back as a failure status with a message,
never a crash. Run as ``python -m tests.core_calls``, it makes every call in CALLS in order and
prints one line per call (``ok NAME``, ``accepted NAME`` or ``bad NAME reason``), flushing
before each call so that a crash names its culprit; tests/test_bad_input.py runs it in a
subprocess.

Adding an entry point: one line in CALLS, (name, function of (lib, ffi, t) making the call,
a fragment the error message must contain). t is a small valid float32 tensor; int64_t and
double arrays are built with ffi.new. A fragment of None accepts success too (calls whose
arguments are odd but legal); "" asks for a failure with any non-empty message.
"""
import sys

import hl
from hl import _core

lib, ffi = _core.lib, _core.ffi
NULL = ffi.NULL
CPU = (0, 0)


def _op(name):
    return _core.OPS[name]


def _i64(*v):
    return ffi.new("int64_t[]", list(v)) if v else ffi.new("int64_t[1]")


def _out():
    return ffi.new("hl_tensor *[4]")


CALLS = [
    # ---- tensors ----
    ("tensor_empty: NULL out", lambda t: lib.hl_tensor_empty(0, CPU, 1, _i64(2), NULL), "out is NULL"),
    ("tensor_empty: NULL shape", lambda t: lib.hl_tensor_empty(0, CPU, 2, NULL, _out()), "shape is NULL"),
    ("tensor_empty: ndim -1", lambda t: lib.hl_tensor_empty(0, CPU, -1, _i64(1), _out()), "-1 dimensions"),
    ("tensor_empty: ndim 9", lambda t: lib.hl_tensor_empty(0, CPU, 9, _i64(*[1] * 9), _out()), "9 dimensions"),
    ("tensor_empty: dtype 99", lambda t: lib.hl_tensor_empty(99, CPU, 1, _i64(2), _out()), "invalid dtype code 99"),
    ("tensor_empty: negative size", lambda t: lib.hl_tensor_empty(0, CPU, 2, _i64(2, -3), _out()), "negative size -3"),
    ("tensor_empty: huge", lambda t: lib.hl_tensor_empty(0, CPU, 2, _i64(2 ** 40, 2 ** 40), _out()), "too large"),
    ("tensor_empty: device kind 7", lambda t: lib.hl_tensor_empty(0, (7, 0), 1, _i64(2), _out()), "not available"),
    ("tensor_empty: cpu:3", lambda t: lib.hl_tensor_empty(0, (0, 3), 1, _i64(2), _out()), "cpu:3"),
    ("tensor_empty: cuda:-1", lambda t: lib.hl_tensor_empty(0, (1, -1), 1, _i64(2), _out()), "cuda:-1"),
    ("tensor_write: NULL tensor", lambda t: lib.hl_tensor_write(NULL, _i64(1), 8), "tensor is NULL"),
    ("tensor_write: NULL source", lambda t: lib.hl_tensor_write(t, NULL, 24), "host pointer is NULL"),
    ("tensor_write: wrong size", lambda t: lib.hl_tensor_write(t, _i64(1, 2, 3, 4), 32), "32 bytes"),
    ("tensor_read: NULL dest", lambda t: lib.hl_tensor_read(t, NULL, 24), "host pointer is NULL"),
    ("tensor_read: non-contiguous", lambda t: lib.hl_tensor_read(_T(t), _i64(0, 0, 0), 24), "not contiguous"),
    ("to_device: NULL", lambda t: lib.hl_tensor_to_device(NULL, CPU, _out()), "to_device"),
    ("to_device: NULL out", lambda t: lib.hl_tensor_to_device(t, CPU, NULL), "to_device"),
    ("to_device: cuda:15", lambda t: lib.hl_tensor_to_device(t, (1, 15), _out()), "not available"),
    ("memory_stats: cuda:9", lambda t: lib.hl_memory_stats((1, 9), NULL, NULL, NULL), "memory_stats"),
    ("memory_stats: NULLs", lambda t: lib.hl_memory_stats(CPU, NULL, NULL, NULL), None),
    ("empty_cache: kind 5", lambda t: lib.hl_memory_empty_cache((5, 0)), "empty_cache"),
    # ---- views ----
    ("reshape: NULL x", lambda t: lib.hl_view_reshape(NULL, 1, _i64(6), _out()), "reshape: input tensor is NULL"),
    ("reshape: NULL shape", lambda t: lib.hl_view_reshape(t, 2, NULL, _out()), "reshape: 2 values expected"),
    ("reshape: NULL out", lambda t: lib.hl_view_reshape(t, 1, _i64(6), NULL), "reshape: output pointer"),
    ("reshape: ndim 9", lambda t: lib.hl_view_reshape(t, 9, _i64(*[1] * 8, 6), _out()), "9 dimensions"),
    ("reshape: overflow", lambda t: lib.hl_view_reshape(t, 3, _i64(2 ** 40, 2 ** 40, 0), _out()), "too large"),
    ("reshape (copy): NULL x", lambda t: lib.hl_reshape(NULL, 1, _i64(6), _out()), "reshape"),
    ("permute: NULL perm", lambda t: lib.hl_view_permute(t, NULL, _out()), "permute"),
    ("permute: NULL x", lambda t: lib.hl_view_permute(NULL, _i64(0), _out()), "permute"),
    ("permute: huge axis", lambda t: lib.hl_view_permute(t, _i64(2 ** 62, 0), _out()), "not a permutation"),
    ("slice: NULL arrays", lambda t: lib.hl_view_slice(t, NULL, NULL, NULL, _out()), "slice"),
    ("slice: overflowing step", lambda t: lib.hl_view_slice(t, _i64(0, 0), _i64(2, 3), _i64(2 ** 62, 1), _out()), "slice: axis 0"),
    ("slice: overflowing length", lambda t: lib.hl_view_slice(t, _i64(1, 0), _i64(2 ** 62, 3), _i64(-4, 1), _out()), "slice: axis 0"),
    ("slice: step 0", lambda t: lib.hl_view_slice(t, _i64(0, 0), _i64(1, 1), _i64(0, 1), _out()), "step 0"),
    ("select: NULL x", lambda t: lib.hl_view_select(NULL, 0, 0, _out()), "select"),
    ("select: index 2**63-1", lambda t: lib.hl_view_select(t, 0, 2 ** 63 - 1, _out()), "out of bounds"),
    ("select: index -2**63", lambda t: lib.hl_view_select(t, 0, -2 ** 63, _out()), "out of bounds"),
    ("select: axis -2**63", lambda t: lib.hl_view_select(t, -2 ** 63, 0, _out()), "axis"),
    ("expand: NULL shape", lambda t: lib.hl_view_expand(t, 3, NULL, _out()), "expand"),
    ("expand: huge", lambda t: lib.hl_view_expand(t, 4, _i64(2 ** 40, 2 ** 40, 2, 3), _out()), "too large"),
    ("expand: ndim -1", lambda t: lib.hl_view_expand(t, -1, _i64(1), _out()), "expand"),
    ("squeeze: NULL axes", lambda t: lib.hl_view_squeeze(t, 2, NULL, _out()), "squeeze"),
    ("squeeze: naxes -5", lambda t: lib.hl_view_squeeze(t, -5, _i64(0), _out()), "squeeze"),
    ("unsqueeze: NULL out", lambda t: lib.hl_view_unsqueeze(t, 0, NULL), "unsqueeze"),
    ("unsqueeze: axis 2**62", lambda t: lib.hl_view_unsqueeze(t, 2 ** 62, _out()), "unsqueeze: axis"),
    ("flip: NULL axes", lambda t: lib.hl_view_flip(t, 1, NULL, _out()), "flip"),
    ("split: NULL sizes", lambda t: lib.hl_view_split(t, 0, 2, NULL, _out()), "split"),
    ("split: NULL outs", lambda t: lib.hl_view_split(t, 0, 1, _i64(2), NULL), "split"),
    ("split: n -1", lambda t: lib.hl_view_split(t, 0, -1, _i64(2), _out()), "split"),
    ("split: overflowing sizes", lambda t: lib.hl_view_split(t, 0, 2, _i64(2 ** 62, 2 ** 62), _out()), "split"),
    # ---- copies ----
    ("contiguous: NULL", lambda t: lib.hl_contiguous(NULL, _out()), "contiguous"),
    ("copy: NULL dst", lambda t: lib.hl_copy(NULL, t), "copy"),
    ("copy: NULL src", lambda t: lib.hl_copy(t, NULL), "copy"),
    ("cast: NULL x", lambda t: lib.hl_cast(NULL, 0, _out()), "cast"),
    ("cast: NULL out", lambda t: lib.hl_cast(t, 0, NULL), "cast"),
    ("cast: dtype 99", lambda t: lib.hl_cast(t, 99, _out()), "cast: invalid dtype code 99"),
    ("fill: NULL", lambda t: lib.hl_fill(NULL, 1.0), "fill"),
    ("fill: nan", lambda t: lib.hl_fill(t, float("nan")), None),
    ("arange: NULL out", lambda t: lib.hl_arange(0, 1, 3, 0, CPU, NULL), "arange"),
    ("arange: n -1", lambda t: lib.hl_arange(0, 1, -1, 0, CPU, _out()), "negative length"),
    ("arange: dtype 99", lambda t: lib.hl_arange(0, 1, 3, 99, CPU, _out()), "invalid dtype code 99"),
    ("arange: inf step", lambda t: lib.hl_arange(0, float("inf"), 3, 0, CPU, _out()), "finite"),
    ("arange: huge n", lambda t: lib.hl_arange(0, 1, 2 ** 62, 0, CPU, _out()), "too large"),
    ("arange: int overflow", lambda t: lib.hl_arange(0, 9e15, 10 ** 4, 3, CPU, _out()), "overflow"),
    ("arange: float start 1e300", lambda t: lib.hl_arange(1e300, 1e300, 2, 0, CPU, _out()), None),
    ("arange: device 4", lambda t: lib.hl_arange(0, 1, 3, 0, (4, 0), _out()), "not available"),
    ("eye: NULL out", lambda t: lib.hl_eye(2, 2, 0, 0, CPU, NULL), "eye"),
    ("eye: dtype 1000", lambda t: lib.hl_eye(2, 2, 0, 1000, CPU, _out()), "invalid dtype code 1000"),
    ("eye: k 2**63-1", lambda t: lib.hl_eye(3, 3, 2 ** 63 - 1, 0, CPU, _out()), None),
    ("eye: k -2**63", lambda t: lib.hl_eye(3, 3, -2 ** 63, 0, CPU, _out()), None),
    ("eye: huge", lambda t: lib.hl_eye(2 ** 40, 2 ** 40, 0, 0, CPU, _out()), "too large"),
    ("triangle: NULL", lambda t: lib.hl_triangle(NULL, 0, 0, _out()), "triangle"),
    ("triangle: k 2**63-1", lambda t: lib.hl_triangle(t, 2 ** 63 - 1, 1, _out()), None),
    ("triangle: k -2**63", lambda t: lib.hl_triangle(t, -2 ** 63, 0, _out()), None),
    # ---- element-wise ----
    ("unary: op -1", lambda t: lib.hl_unary(-1, t, 0, 0, _out()), "op -1"),
    ("unary: op count", lambda t: lib.hl_unary(lib.hl_op_count(), t, 0, 0, _out()), "is not a unary op"),
    ("unary: op 10**6", lambda t: lib.hl_unary(10 ** 6, t, 0, 0, _out()), "is not a unary op"),
    ("unary: binary op code", lambda t: lib.hl_unary(_op("add"), t, 0, 0, _out()), "add) is not a unary op"),
    ("unary: NULL x", lambda t: lib.hl_unary(_op("exp"), NULL, 0, 0, _out()), "exp: input is NULL"),
    ("unary: NULL out", lambda t: lib.hl_unary(_op("exp"), t, 0, 0, NULL), "exp: output pointer"),
    ("unary: nan params", lambda t: lib.hl_unary(_op("celu"), t, float("nan"), float("inf"), _out()), None),
    ("binary: op -7", lambda t: lib.hl_binary(-7, t, t, _out()), "is not a binary op"),
    ("binary: unary op code", lambda t: lib.hl_binary(_op("exp"), t, t, _out()), "is not a binary op"),
    ("binary: NULL a", lambda t: lib.hl_binary(_op("add"), NULL, t, _out()), "add: input is NULL"),
    ("binary: NULL b", lambda t: lib.hl_binary(_op("add"), t, NULL, _out()), "add: input is NULL"),
    ("binary: NULL out", lambda t: lib.hl_binary(_op("add"), t, t, NULL), "add: output pointer"),
    ("where: NULL cond", lambda t: lib.hl_where(NULL, t, t, _out()), "where"),
    ("where: NULL out", lambda t: lib.hl_where(t, t, t, NULL), "where"),
    # ---- writes into a broadcast view (zero stride on an axis of size > 1) ----
    ("unary: broadcast out", lambda t: _into_broadcast(t, lambda b, o: lib.hl_unary(_op("neg"), b, 0, 0, o)), "neg: the output is a broadcast view"),
    ("copy: broadcast dst", lambda t: lib.hl_copy(_B(t), t), "copy: the destination is a broadcast view"),
    ("fill: broadcast", lambda t: lib.hl_fill(_B(t), 1.0), "fill: the tensor is a broadcast view"),
    ("random_normal: broadcast", lambda t: lib.hl_random_normal(_B(t), 0, 0, 0.0, 1.0), "broadcast view"),
    ("batch_norm: broadcast running_var", lambda t: lib.hl_batch_norm(t, NULL, NULL, _C3(), _C3(True), 1, 0.1, 1e-5, _out(), NULL, NULL), "running_var is a broadcast view"),
    # ---- plans ----
    ("plan_run: NULL", lambda t: lib.hl_plan_run(NULL), "plan_run"),
    ("plan_end: nothing recorded", lambda t: lib.hl_plan_end(ffi.new("hl_plan *[1]")), "no plan"),
    ("plan_end: NULL out", lambda t: lib.hl_plan_end(NULL), "plan_end"),
    ("plan_input: NULL", lambda t: lib.hl_plan_input(NULL, ffi.new("int64_t *")), "plan_input"),
    ("plan_input: not recording", lambda t: lib.hl_plan_input(t, ffi.new("int64_t *")), "no plan is being recorded"),
    ("plan_bind: NULL plan", lambda t: lib.hl_plan_bind(NULL, 0, t), "plan_bind"),
    ("plan_set_options: NULL", lambda t: lib.hl_plan_set_options(NULL, 0), "plan_set_options"),
    ("plan_stats: NULL", lambda t: lib.hl_plan_stats(NULL, ffi.new("hl_plan_info *")), "plan_stats"),
    ("tensor_check_host_read: NULL", lambda t: lib.hl_tensor_check_host_read(NULL), "tensor"),
    # ---- the other families: NULL everything (each must check before it dereferences);
    # their messages are theirs to word, so any message will do ----
    ("reduce: invalid op", lambda t: lib.hl_reduce(-1, t, 0, NULL, 0, _out()), ""),
    ("reduce: NULL x", lambda t: lib.hl_reduce(_op("sum"), NULL, 0, NULL, 0, _out()), ""),
    ("reduce: NULL axes", lambda t: lib.hl_reduce(_op("sum"), t, 1, NULL, 0, _out()), ""),
    ("reduce: NULL out", lambda t: lib.hl_reduce(_op("sum"), t, 0, NULL, 0, NULL), ""),
    ("arg_reduce: NULL x", lambda t: lib.hl_arg_reduce(_op("argmax"), NULL, 0, 0, 0, _out()), ""),
    ("arg_reduce: invalid op", lambda t: lib.hl_arg_reduce(_op("exp"), t, 0, 0, 0, _out()), ""),
    ("cumsum: NULL x", lambda t: lib.hl_cumsum(NULL, 0, 0, 0, _out()), ""),
    ("matmul: NULL", lambda t: lib.hl_matmul(NULL, NULL, _out()), ""),
    ("matmul: NULL out", lambda t: lib.hl_matmul(t, _T(t), NULL), ""),
    ("gemm: NULL", lambda t: lib.hl_gemm(NULL, NULL, NULL, 0, 0, 1.0, 0.0, _out()), ""),
    ("attention: NULL", lambda t: lib.hl_attention(NULL, NULL, NULL, NULL, 1.0, 0, 0, _out()), "input is NULL"),
    ("attention: NULL out", lambda t: lib.hl_attention(t, t, t, NULL, 1.0, 0, 0, NULL), "output pointer is NULL"),
    ("attention: 2-D", lambda t: lib.hl_attention(t, t, t, t, 1.0, 1, 1, _out()), "must be 4-D"),
    ("conv: NULL", lambda t: lib.hl_conv(NULL, NULL, NULL, NULL, NULL, NULL, 1, _out()), ""),
    # conv with NULL stride/pads/dilation takes the documented defaults (1, 0, 1): not a failure
    ("conv_grad_input: NULL", lambda t: lib.hl_conv_grad_input(NULL, NULL, NULL, NULL, NULL, NULL, 1, _out()), ""),
    ("conv_grad_weight: NULL", lambda t: lib.hl_conv_grad_weight(NULL, NULL, NULL, NULL, NULL, NULL, 1, _out()), ""),
    ("conv_transpose: NULL", lambda t: lib.hl_conv_transpose(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, _out()), ""),
    ("pool: invalid op", lambda t: lib.hl_pool(-1, _X4(), NULL, NULL, NULL, NULL, 0, 0, _out(), NULL), ""),
    ("pool: NULL", lambda t: lib.hl_pool(_op("max_pool"), NULL, NULL, NULL, NULL, NULL, 0, 0, _out(), NULL), ""),
    ("pool: NULL params", lambda t: lib.hl_pool(_op("max_pool"), _X4(), NULL, NULL, NULL, NULL, 0, 0, _out(), NULL), ""),
    ("pool_grad: NULL", lambda t: lib.hl_pool_grad(_op("max_pool"), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, _out()), ""),
    ("batch_norm: NULL", lambda t: lib.hl_batch_norm(NULL, NULL, NULL, NULL, NULL, 0, 0.1, 1e-5, _out(), NULL, NULL), ""),
    ("batch_norm_grad: NULL", lambda t: lib.hl_batch_norm_grad(NULL, NULL, NULL, NULL, NULL, 0, _out(), NULL, NULL), ""),
    ("layer_norm: NULL", lambda t: lib.hl_layer_norm(NULL, NULL, NULL, 0, 1e-5, _out(), NULL, NULL), ""),
    ("layer_norm_grad: NULL", lambda t: lib.hl_layer_norm_grad(NULL, NULL, NULL, NULL, NULL, 0, _out(), NULL, NULL), ""),
    ("softmax: invalid op", lambda t: lib.hl_softmax(_op("add"), t, 0, _out()), ""),
    ("softmax: NULL", lambda t: lib.hl_softmax(_op("softmax"), NULL, 0, _out()), ""),
    ("softmax_grad: NULL", lambda t: lib.hl_softmax_grad(_op("softmax"), NULL, NULL, 0, _out()), ""),
    ("softmax_cross_entropy: NULL", lambda t: lib.hl_softmax_cross_entropy(NULL, NULL, -100, _out(), NULL), ""),
    ("softmax_cross_entropy_grad: NULL", lambda t: lib.hl_softmax_cross_entropy_grad(NULL, NULL, NULL, -100, _out()), ""),
    ("gather: NULL", lambda t: lib.hl_gather(NULL, 0, NULL, _out()), ""),
    ("gather_grad: NULL", lambda t: lib.hl_gather_grad(NULL, 0, NULL, 2, NULL, _out()), ""),
    ("gather_elements: NULL", lambda t: lib.hl_gather_elements(NULL, 0, NULL, _out()), ""),
    ("scatter_elements: NULL", lambda t: lib.hl_scatter_elements(NULL, 0, NULL, NULL, 0, _out()), ""),
    ("one_hot: NULL", lambda t: lib.hl_one_hot(NULL, 3, -1, 1.0, 0.0, 0, _out()), ""),
    ("one_hot: dtype 99", lambda t: lib.hl_one_hot(_I(), 3, -1, 1.0, 0.0, 99, _out()), ""),
    ("nonzero: NULL", lambda t: lib.hl_nonzero(NULL, _out()), ""),
    ("topk: NULL", lambda t: lib.hl_topk(NULL, 1, 0, 1, 1, _out(), _out()), ""),
    ("concat: NULL list", lambda t: lib.hl_concat(2, NULL, 0, _out()), ""),
    ("concat: NULL entry", lambda t: lib.hl_concat(2, ffi.new("hl_tensor *[2]", [t, NULL]), 0, _out()), ""),
    ("concat: n -1", lambda t: lib.hl_concat(-1, ffi.new("hl_tensor *[1]", [t]), 0, _out()), ""),
    ("pad: NULL", lambda t: lib.hl_pad(NULL, NULL, 0, 0.0, _out()), ""),
    ("pad: NULL pads", lambda t: lib.hl_pad(t, NULL, 0, 0.0, _out()), ""),
    ("tile: NULL", lambda t: lib.hl_tile(NULL, NULL, _out()), ""),
    ("resize: NULL", lambda t: lib.hl_resize(NULL, NULL, NULL, 0, 0, 0, _out()), ""),
    ("resize_grad: NULL", lambda t: lib.hl_resize_grad(NULL, NULL, NULL, 0, 0, 0, _out()), ""),
    ("random_uniform: NULL", lambda t: lib.hl_random_uniform(NULL, 0, 0, 0.0, 1.0), ""),
    ("random_normal: NULL", lambda t: lib.hl_random_normal(NULL, 0, 0, 0.0, 1.0), ""),
    ("random_bernoulli: NULL", lambda t: lib.hl_random_bernoulli(NULL, 0, 0, 0.5), ""),
]


def _T(t):
    out = _out()
    assert lib.hl_view_permute(t, _i64(1, 0), out) == 0
    return ffi.gc(out[0], lib.hl_tensor_release)


def _B(t):
    """t (2, 3) broadcast to (2, 2, 3): a view whose first axis has stride 0."""
    out = _out()
    assert lib.hl_view_expand(t, 3, _i64(2, 2, 3), out) == 0
    return ffi.gc(out[0], lib.hl_tensor_release)


def _into_broadcast(t, call):
    """call(b, out) with out pointing at b = _B(t), kept alive through the call."""
    b = _B(t)
    return call(b, ffi.new("hl_tensor *[1]", [b]))


def _C3(broadcast=False):
    """Three channels' statistics: a float32 (3,) tensor, or one element broadcast to (3,)."""
    return hl.zeros(1).expand(3)._h if broadcast else hl.zeros(3)._h


def _X4():
    return hl.zeros(1, 1, 3, 3)._h


def _I():
    return hl.tensor([0, 1])._h


def main(names=None):
    t = hl.zeros(2, 3)._h
    for name, call, fragment in CALLS:
        if names and name not in names:
            continue
        print("start", name, flush=True)
        status = call(t)
        msg = ffi.string(lib.hl_last_error()).decode("utf-8", "replace")
        if status == 0:
            print("accepted" if fragment is None else "bad", name,
                  "" if fragment is None else "returned HL_OK", flush=True)
        elif fragment is not None and (fragment not in msg or not msg):
            print("bad", name, f"message {msg!r} lacks {fragment!r}", flush=True)
        else:
            print("ok", name, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
