"""The operators whose attributes are graphs: If, Loop, Scan and FlexAttention (its score and
mask modifiers), and Optional of a tensor.

A subgraph (If's branches, Loop's and Scan's body) arrives as a Graph in ``n.attrs``. It runs
with run_nodes over a scope that layers its inputs over its initializers over the enclosing
graph's values, so it reads outer names and gradients flow through it like any other op. These
handlers sit above the program that runs graphs (program.py), not in ops/ below it, so that
no module of hl.onnx imports one that imports it back; hl/onnx/__init__.py imports this one.
"""
import math
from collections import ChainMap

import numpy as np

from .. import errors
from .ops._util import F, axis_of, const, device_of, np_dtype_of_onnx, via_float32
from .ops.attention import repeat_heads
from .program import run_nodes
from .registry import onnx_op


class _Body:
    """A subgraph ready to run many times: its initializers made tensors once."""

    def __init__(self, n, graph, device):
        self.n, self.graph = n, graph
        self.consts = {name: const(a, device=device) for name, a in graph.initializers.items()}
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]

    def run(self, inputs):
        """The body's outputs for ``inputs`` (a list in the body's input order)."""
        if len(inputs) != len(self.input_names):
            raise self.n.error(f"its body takes {len(self.input_names)} inputs "
                               f"({self.input_names}), the node gives {len(inputs)}",
                               errors.ONNXError)
        feeds = dict(zip(self.input_names, inputs))
        values = ChainMap(feeds, self.consts, self.n.scope)
        run_nodes(self.graph.nodes, values, self.n.training, folded=())
        return [values[name] for name in self.output_names]


def _bool(n, t, what):
    v = n.scalar(t)
    if not isinstance(v, (bool, int, np.bool_)):
        raise n.error(f"{what} must be a bool, got {t.dtype.name}", errors.DTypeError)
    return bool(v)


@onnx_op("If")
def if_(n, cond):
    branch = n.attr("then_branch") if _bool(n, cond, "the condition") else n.attr("else_branch")
    outs = _Body(n, branch, device_of(n, [cond])).run([])
    if len(outs) != n.noutputs:
        raise n.error(f"the branch taken gives {len(outs)} outputs, the node has "
                      f"{n.noutputs}", errors.ONNXError)
    return tuple(outs)


@onnx_op("Loop")
def loop(n, trip_count, cond, *carried):
    """for i in range(M) while cond: carried, scans = body(i, cond, carried)."""
    if trip_count is None and cond is None:
        raise n.error("has neither a trip count nor a condition: it would never end",
                      errors.ONNXError)
    limit = None if trip_count is None else int(n.scalar(trip_count))
    going = True if cond is None else _bool(n, cond, "the condition")
    device = device_of(n, [trip_count, cond, *carried])
    body = _Body(n, n.attr("body"), device)
    nc = len(carried)
    nscan = len(body.output_names) - 1 - nc
    if nscan < 0:
        raise n.error(f"its body gives {len(body.output_names)} outputs, fewer than the "
                      f"condition and {nc} loop-carried values", errors.ONNXError)
    carried = list(carried)
    scans = [[] for _ in range(nscan)]
    i = 0
    going_t = const(np.array(going), device=device)
    while going and (limit is None or i < limit):
        outs = body.run([const(np.array(i, dtype=np.int64), device=device), going_t, *carried])
        going_t = outs[0]
        if cond is not None:  # without an initial condition, the body's one is ignored
            going = _bool(n, going_t, "the body's condition output")
        carried = outs[1:1 + nc]
        for k, t in enumerate(outs[1 + nc:]):
            scans[k].append(t)
        i += 1
    return (*carried, *(_stack_scan(n, s, body.graph.outputs[1 + nc + k], device)
                        for k, s in enumerate(scans)))


def _stack_scan(n, parts, spec, device, axis=0):
    """The per-iteration values of a scan output stacked along ``axis``; with no iteration,
    an empty tensor shaped as the body declares (unknown dimensions 0)."""
    if parts:
        return F.stack(parts, axis)
    dims = [d if isinstance(d, int) else 0 for d in (spec.shape or ())]
    dtype = spec.dtype or "float32"
    return F.zeros(0, *dims, dtype=dtype, device=device)


@onnx_op("Scan", since=9)
def scan(n, *inputs):
    m = n.attr("num_scan_inputs")
    if m is None or not 0 < m <= len(inputs):
        raise n.error(f"num_scan_inputs {m} must be between 1 and its {len(inputs)} inputs",
                      errors.ONNXError)
    states, xs = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
    in_axes = n.attr("scan_input_axes", [0] * m)
    in_dirs = n.attr("scan_input_directions", [0] * m)
    body = _Body(n, n.attr("body"), device_of(n, inputs))
    nscan = len(body.output_names) - len(states)
    out_axes = n.attr("scan_output_axes", [0] * nscan)
    out_dirs = n.attr("scan_output_directions", [0] * nscan)
    return _scan(n, body, states, xs, in_axes, in_dirs, out_axes, out_dirs)


def _scan(n, body, states, xs, in_axes, in_dirs, out_axes, out_dirs):
    nscan = len(body.output_names) - len(states)
    if nscan < 0:
        raise n.error(f"its body gives {len(body.output_names)} outputs, fewer than its "
                      f"{len(states)} state values", errors.ONNXError)
    axes = [axis_of(n, a, x.ndim, "scan_input_axes entry") for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise n.error(f"its scan inputs (shapes {[x.shape for x in xs]}) differ in length "
                      f"along their scan axes {axes}", errors.ShapeError)
    steps = lengths.pop()
    # Each scan input as a list of its slices, in the order the body sees them.
    slices = []
    for x, a, d in zip(xs, axes, in_dirs):
        parts = [F.getitem(x, (slice(None),) * a + (t,)) for t in range(steps)]
        slices.append(parts[::-1] if d else parts)
    scans = [[] for _ in range(nscan)]
    for t in range(steps):
        outs = body.run([*states, *(s[t] for s in slices)])
        states = outs[:len(states)]
        for k, y in enumerate(outs[len(states):]):
            scans[k].append(y)
    results = []
    for k, parts in enumerate(scans):
        if out_dirs[k] if k < len(out_dirs) else 0:
            parts = parts[::-1]
        spec = body.graph.outputs[len(states) + k]
        ndim = (parts[0].ndim if parts else len(spec.shape or ())) + 1
        axis = axis_of(n, out_axes[k] if k < len(out_axes) else 0, ndim,
                       "scan_output_axes entry")
        results.append(_stack_scan(n, parts, spec, device_of(n, xs), axis))
    return (*states, *results)


@onnx_op("Scan", since=8)
def scan8(n, seq_lens, *inputs):
    """Opset 8's Scan: a leading batch axis on every input (scanned one entry at a time),
    the scan axis next, and per-entry sequence lengths (shorter outputs padded with 0)."""
    m = n.attr("num_scan_inputs")
    if m is None or not 0 < m <= len(inputs):
        raise n.error(f"num_scan_inputs {m} must be between 1 and its {len(inputs)} inputs",
                      errors.ONNXError)
    body = _Body(n, n.attr("body"), device_of(n, inputs))
    ns = len(inputs) - m
    batch = inputs[0].shape[0]
    full = inputs[ns].shape[1] if inputs[ns].ndim > 1 else 0
    lens = n.ints(seq_lens, "sequence_lens") if seq_lens is not None else [full] * batch
    if len(lens) != batch or any(not 0 <= v <= full for v in lens):
        raise n.error(f"sequence_lens {lens} must give {batch} lengths in [0, {full}]",
                      errors.ValueError)
    dirs = n.attr("directions", [0] * m)
    per_entry = []
    for b in range(batch):
        states = [s[b] for s in inputs[:ns]]
        xs = [x[b, :lens[b]] for x in inputs[ns:]]
        outs = _scan(n, body, states, xs, [0] * m, dirs, [], [])
        outs = list(outs)
        for k in range(ns, len(outs)):  # pad short sequences' scan outputs to full length
            pad = full - outs[k].shape[0]
            if pad:
                outs[k] = F.pad(outs[k], [(0, pad)] + [(0, 0)] * (outs[k].ndim - 1))
        per_entry.append(outs)
    return tuple(F.stack([e[k] for e in per_entry], 0) for k in range(len(per_entry[0])))


# ---- Optional (of a tensor) ------------------------------------------------------------------

@onnx_op("OptionalHasElement")
def optional_has_element(n, x=None):
    return const(np.array(x is not None), device=device_of(n, [x]))


@onnx_op("OptionalGetElement")
def optional_get_element(n, x):
    if x is None:
        raise n.error("the optional input is empty", errors.ValueError)
    return x


@onnx_op("Optional")
def optional(n, x=None):
    if x is None:
        raise n.error("an empty Optional is not supported by hl (only optional tensors that "
                      "hold a value)", errors.UnsupportedError)
    return x


# ---- FlexAttention: its score and mask modifiers are subgraphs ------------------------------

@onnx_op("FlexAttention", domain="ai.onnx.preview")
@via_float32
def flex_attention(n, q, k, v):
    """Attention over 4-D heads whose scores and probabilities pass through the model's own
    subgraphs (score_mod before the softmax, prob_mod after it)."""
    if not (q.ndim == k.ndim == v.ndim == 4) or k.shape[:3] != v.shape[:3] or \
            k.shape[3] != q.shape[3] or k.shape[0] != q.shape[0] or q.shape[1] % k.shape[1]:
        raise n.error(f"Q {q.shape}, K {k.shape} and V {v.shape} must be 4-D [batch, heads, "
                      f"seq, size] that fit together", errors.ShapeError)
    scale = n.attr("scale")
    root = math.sqrt(1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale))
    reps = q.shape[1] // k.shape[1]
    scores = F.matmul(q * root, F.transpose(repeat_heads(k, reps) * root, 0, 1, 3, 2))
    precision = n.attr("softmax_precision")
    if precision is not None:
        scores = F.cast(scores, np_dtype_of_onnx(n, precision))
    device = device_of(n, [q])
    for name in ("score_mod", "prob_mod"):
        if name == "prob_mod":
            scores = F.softmax(scores, -1)
        if n.attr(name) is not None:
            outs = _Body(n, n.attr(name), device).run([scores])
            if len(outs) != 1 or tuple(outs[0].shape) != tuple(scores.shape):
                raise n.error(f"{name} must give one tensor of the scores' shape "
                              f"{scores.shape}", errors.ShapeError)
            scores = outs[0]
    vv = repeat_heads(v, reps)
    y = F.matmul(F.cast(scores, vv.dtype.name) if scores.dtype != vv.dtype else scores, vv)
    return y

