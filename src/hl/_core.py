"""The cffi binding of libcore: the only module in hl that touches cffi objects.

A core tensor is held as an opaque handle (a cffi pointer whose release is tied to Python's
garbage collector). Layers above pass handles back into these functions and never look
inside them. Every core call returns a status; ``check`` turns a failure into the matching
``hl.errors`` exception carrying the core's message (which names the op, shapes and dtypes).
"""
import os
import threading

import numpy as np

from . import errors

# Settings the native libraries read once, when they load (just below), each for threads that
# would otherwise spin on a core libcore's own pool (cpu/thread_pool.c) needs next:
# - libgomp's idle threads spin for up to 300,000 rounds after each OpenMP region by default
#   (milliseconds): at 2 threads on a loaded host, MobileNetV2 batch 1 took 148-152 ms with
#   the default against 40-84 ms with 10,000, ResNet-18 470-516 against 267-269
#   (docs/performance.md).
# - OpenBLAS starts its own server threads when it loads, and they spin for 2^28 cycles
#   (~0.1 s) before they sleep, although hl hands OpenBLAS's parallel work to libcore's pool
#   (cpu/blas_threads.c) and never wakes them: every product in the first ~0.1 s after
#   `import hl` ran at half speed on two cores (a 64 x 768 x 768 product 445 us against 232).
#   2^4 cycles lets them sleep at once.
# A user's own setting wins; the variables are not left set for subprocesses.
_LOAD_ENV = {  # variable: (hl's value, the variables through which a user's setting wins)
    "GOMP_SPINCOUNT": ("10000", {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"}),
    "OPENBLAS_THREAD_TIMEOUT": ("4", {"OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT"}),
}
_SET_HERE = [k for k, (_, user) in _LOAD_ENV.items() if not user & os.environ.keys()]
for _k in _SET_HERE:
    os.environ[_k] = _LOAD_ENV[_k][0]
try:
    import scipy_openblas32  # noqa: F401  loads libscipy_openblas, which the extension links to

    from ._hl_core import ffi, lib
finally:
    for _k in _SET_HERE:
        del os.environ[_k]

_release = lib.hl_tensor_release
_gc = ffi.gc
_new_out = ffi.new
_NULL = ffi.NULL

OPS = {ffi.string(lib.hl_op_name(i)).decode(): i for i in range(lib.hl_op_count())}
OP_NAMES = {i: name for name, i in OPS.items()}

_ERRORS = {
    lib.HL_ERR_SHAPE: errors.ShapeError,
    lib.HL_ERR_DTYPE: errors.DTypeError,
    lib.HL_ERR_DEVICE: errors.DeviceError,
    lib.HL_ERR_INDEX: errors.IndexError,
    lib.HL_ERR_VALUE: errors.ValueError,
    lib.HL_ERR_UNSUPPORTED: errors.UnsupportedError,
    lib.HL_ERR_MEMORY: errors.MemoryError,
    lib.HL_ERR_NOT_VIEWABLE: errors.ValueError,
    lib.HL_ERR_INTERNAL: errors.InternalError,
}


def _default_threads():
    env = os.environ.get("HL_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# One thread count for libcore's OpenMP loops and OpenBLAS: they never run at once.
lib.hl_set_num_threads(_default_threads())


def _load_cuda():
    from . import _cuda_libs
    return _cuda_libs.load(
        lambda path: lib.hl_backend_load(path.encode()),
        lambda: ffi.string(lib.hl_backend_unavailable_reason(1)).decode("utf-8", "replace"),
        lambda why: lib.hl_backend_set_unavailable_reason(1, why.encode()))


_cuda_unavailable = _load_cuda()  # None, or why hl has no CUDA device


def cuda_unavailable_reason():
    """Why no cuda device can be used, or None when the CUDA backend is loaded."""
    return _cuda_unavailable


def device_synchronize(kind, index):
    check(lib.hl_device_synchronize((kind, index)))


def device_count(kind):
    n = 0
    while n < 64 and lib.hl_device_available((kind, n)):
        n += 1
    return n


def op_code(name):
    try:
        return OPS[name]
    except KeyError:
        raise errors.UnsupportedError(f"libcore has no op named {name!r}") from None


def last_error():
    return ffi.string(lib.hl_last_error()).decode("utf-8", "replace")


def raise_status(status):
    raise _ERRORS.get(status, errors.HLError)(last_error())


def check(status):
    if status:
        raise_status(status)


def _own(ptr):
    return _gc(ptr, _release)


# ---- library ----------------------------------------------------------------------------

def version():
    return ffi.string(lib.hl_version()).decode()


def set_num_threads(n):
    lib.hl_set_num_threads(int(n))


def get_num_threads():
    return lib.hl_get_num_threads()


# ---- the thread pool's loop records (hl._pool_trace, bench/pool_profile.py) ----------------

_NUMPY_OF_C = {"int64_t": "i8", "uint64_t": "u8", "int32_t": "i4"}


def pool_region_dtype():
    """hl_pool_region (hl_core.h) as a numpy dtype, its names, offsets and sizes read from the
    C declaration."""
    names, formats, offsets = [], [], []
    for name, field in ffi.typeof("hl_pool_region").fields:
        t = field.type
        formats.append((_NUMPY_OF_C[t.item.cname], t.length) if t.kind == "array"
                       else _NUMPY_OF_C[t.cname])
        names.append(name)
        offsets.append(field.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ffi.sizeof("hl_pool_region")})


def pool_trace_start(regions):
    """Starts recording the pool's loops into `regions` (a contiguous numpy array of
    pool_region_dtype()), which must live until pool_trace_stop."""
    want = pool_region_dtype()
    if not isinstance(regions, np.ndarray) or regions.dtype != want or regions.ndim != 1 or \
            not regions.flags.c_contiguous or not regions.flags.writeable:
        raise errors.ValueError(
            f"pool_trace_start: expected a writeable 1-D contiguous numpy array of "
            f"pool_region_dtype(), got {type(regions).__name__} "
            f"{getattr(regions, 'dtype', None)} {getattr(regions, 'shape', None)}")
    check(lib.hl_pool_trace_start(ffi.cast("hl_pool_region *", regions.ctypes.data),
                                  len(regions)))


def pool_trace_stop():
    """Stops recording once the loops writing a record are done: how many records were
    written (0 when recording was off)."""
    return lib.hl_pool_trace_stop()


def cpu_kernels():
    """The instruction set of the CPU kernels here: "avx512", "avx2" or "portable"."""
    return ffi.string(lib.hl_cpu_kernels()).decode()


def crc32(data, crc=0):
    """CRC-32 of a bytes-like object (bytes, memoryview, numpy array, mmap), continuing from
    crc; equal to zlib.crc32, several times faster where the CPU has carry-less multiply.
    The GIL is released while it runs."""
    buf = ffi.from_buffer(data)
    return lib.hl_crc32(crc & 0xFFFFFFFF, buf, len(buf))


def crc32_combine(crc_a, crc_b, len_b):
    """The CRC-32 of A followed by B, from crc32(A), crc32(B) and len(B)."""
    return lib.hl_crc32_combine(crc_a & 0xFFFFFFFF, crc_b & 0xFFFFFFFF, int(len_b))


def crc32_accelerated():
    return bool(lib.hl_crc32_accelerated())


def device_available(kind, index):
    return bool(lib.hl_device_available((kind, index)))


def memory_stats(kind, index):
    vals = ffi.new("int64_t[3]")
    check(lib.hl_memory_stats((kind, index), vals, vals + 1, vals + 2))
    return {"in_use": vals[0], "cached": vals[1], "peak": vals[2]}


def empty_cache(kind, index):
    check(lib.hl_memory_empty_cache((kind, index)))


def reset_peak_memory_stats(kind, index):
    check(lib.hl_memory_reset_peak((kind, index)))


# ---- tensors ----------------------------------------------------------------------------

def empty(shape, dtype_code, kind=0, index=0):
    p = _new_out("hl_tensor *[1]")
    check(lib.hl_tensor_empty(dtype_code, (kind, index), len(shape), list(shape), p))
    return _own(p[0])


def plain_pages(h):
    """Ordinary pages, not huge ones, for the untouched memory of h's block (memory a file
    read fills once: hl_tensor_plain_pages)."""
    lib.hl_tensor_plain_pages(h)


def borrow_host(array, dtype_code):
    """A CPU tensor handle over a C-contiguous, aligned numpy array's memory: no copy. The
    caller keeps the array alive and unchanged for as long as anything may read the tensor."""
    p = _new_out("hl_tensor *[1]")
    check(lib.hl_tensor_borrow_host(ffi.from_buffer(array), array.nbytes, dtype_code,
                                    array.ndim, list(array.shape), p))
    return _own(p[0])


def shape(h):
    return tuple(lib.hl_tensor_shape(h)[0:lib.hl_tensor_ndim(h)])


def strides(h):
    return tuple(lib.hl_tensor_strides(h)[0:lib.hl_tensor_ndim(h)])


def ndim(h):
    return lib.hl_tensor_ndim(h)


def numel(h):
    return lib.hl_tensor_numel(h)


def dtype_code(h):
    return lib.hl_tensor_dtype(h)


def device_of(h):
    d = lib.hl_tensor_device(h)
    return d.kind, d.index


# the device as one int (kind * 2**32 + index), without building a struct: a cheap key
device_key = lib.hl_tensor_device_key


def offset(h):
    return lib.hl_tensor_offset(h)


def is_contiguous(h):
    return bool(lib.hl_tensor_is_contiguous(h))


def shares_storage(a, b):
    return bool(lib.hl_tensor_shares_storage(a, b))


_new_view = object.__new__


class _ArrayView:
    """Exposes a CPU tensor's memory to numpy without a copy; the resulting array keeps this
    object, and so the handle and its storage, alive."""

    __slots__ = ("__array_interface__", "_handle")

    def __init__(self, h, np_dtype):
        self._handle = h
        n = lib.hl_tensor_ndim(h)
        size = np_dtype.itemsize
        shape_ = tuple(lib.hl_tensor_shape(h)[0:n])
        strides = tuple(lib.hl_tensor_strides(h)[0:n])
        # A broadcast view (zero stride on an axis of size > 1) is read-only, as in numpy's
        # broadcast_to and as the core refuses to write into one.
        broadcast = any(st == 0 and d > 1 for d, st in zip(shape_, strides))
        self.__array_interface__ = {
            "version": 3,
            "shape": shape_,
            "strides": tuple(s * size for s in strides),
            "typestr": np_dtype.str if np_dtype.kind != "V" else "|V2",
            "data": (int(ffi.cast("uintptr_t", lib.hl_tensor_data(h))), broadcast),
        }


def array_layout(h, np_dtype):
    """The __array_interface__ of a numpy view of CPU tensor h: a template for arrays over
    tensors laid out as h is (PlanOutputs replaces its data address)."""
    return _ArrayView(h, np_dtype).__array_interface__


class _AdoptingView:
    """An __array_interface__ over tensor memory whose handle arrives after the array is
    made (PlanOutputs): the array keeps this object, which releases the handle it adopted."""

    __slots__ = ("__array_interface__", "_raw")

    def __del__(self):
        if self._raw is not None:
            lib.hl_tensor_release(self._raw)


# Outputs of at most this many bytes in all are copied out of a plan's memory by the replay's
# call (PlanOutputs.run_copy), not handed over: copying a few KB takes ~1 us where arrays()
# and take() cost ~25 us of Python and C around each replay (MobileNetV2 b1's 4 KB output:
# Python after the replay's last loop 30 -> 13.5 us). Past this size a copy costs more than
# the take.
COPY_OUTPUTS_MAX = 64 << 10


class PlanOutputs:
    """A plan's CPU outputs as numpy arrays with little Python after the replay (which
    leaves Python's data in cold caches: each step then costs 2-3x). Small ones (`copies`)
    are copied out by the replay's own call (run_copy). Otherwise, without a copy: arrays()
    makes, before the replay, arrays over the memory it will write; take() after it hands
    each array that memory (hl_plan_take_outputs: the plan writes fresh memory next time),
    or replaces it by an array over a copy where the plan cannot hand the memory over.
    handles: the output tensors; layouts: their numpy views' __array_interface__s."""

    def __init__(self, plan, handles, layouts):
        self._plan, self._handles, self._layouts = plan, list(handles), layouts
        n = len(self._handles)
        self._ts = ffi.new("hl_tensor *[]", self._handles)
        self._out = ffi.new("hl_tensor *[]", n)
        self._handed = ffi.new("int[]", n)
        self._views = ()
        # small contiguous outputs are copied out by the replay's own call (run_copy)
        sizes = [lib.hl_tensor_numel(h) * np.dtype(layout["typestr"]).itemsize
                 for h, layout in zip(self._handles, layouts)]
        self.copies = sum(sizes) <= COPY_OUTPUTS_MAX and all(
            lib.hl_tensor_is_contiguous(h) for h in self._handles)
        self._nbytes = ffi.new("size_t[]", sizes)
        self._dst = ffi.new("void *[]", n)
        self._specs = [(layout["shape"], np.dtype(layout["typestr"])) for layout in layouts]

    def run_copy(self):
        """Replays the plan and returns new arrays with its outputs' values, copied into them
        by the replay's own C call (hl_plan_run_copy): the arrays are made before it, while
        Python's data is in cache, and nothing runs in Python between the replay and the
        copy. The plan keeps its memory and writes it again next time."""
        arrays = [np.empty(shape, dtype) for shape, dtype in self._specs]
        for i, a in enumerate(arrays):
            self._dst[i] = ffi.from_buffer(a)
        status = lib.hl_plan_run_copy(self._plan, len(arrays), self._ts, self._dst, self._nbytes)
        if status:   # (no call on success: each step after a replay runs from cold caches)
            raise_status(status)
        return arrays

    def arrays(self):
        """Arrays over the memory the next replay writes: its outputs once take() returns."""
        views = []
        for h, layout in zip(self._handles, self._layouts):
            view = _new_view(_AdoptingView)
            view._raw = None
            address = int(ffi.cast("uintptr_t", lib.hl_tensor_data(h)))
            view.__array_interface__ = dict(layout, data=(address, layout["data"][1]))
            views.append(view)
        self._views = views
        return [np.asarray(v) for v in views]

    def take(self, arrays):
        """After the replay: the outputs' memory to `arrays` (from arrays(), changed in
        place where a copy stands in)."""
        n = len(self._handles)
        status = lib.hl_plan_take_outputs(self._plan, n, self._ts, self._out, self._handed)
        if status:
            for i in range(n):
                if self._out[i] != _NULL:
                    lib.hl_tensor_release(self._out[i])
            raise_status(status)
        for i, view in enumerate(self._views):
            out = self._out[i]
            if self._handed[i] and int(ffi.cast("uintptr_t", lib.hl_tensor_data(out))) == \
                    view.__array_interface__["data"][0]:
                view._raw = out
            else:  # a copy (or, never expected, other memory): its own view
                arrays[i] = numpy_view(_own(out), np.dtype(self._layouts[i]["typestr"]))
        self._views = ()


def numpy_view(h, np_dtype):
    """A numpy array over a CPU tensor's memory (no copy). np_dtype is the numpy dtype."""
    if lib.hl_tensor_numel(h) == 0:
        return np.empty(shape(h), dtype=np_dtype)
    check(lib.hl_tensor_check_host_read(h))  # a value a plan being recorded will compute
    if lib.hl_tensor_data(h) == _NULL:
        raise errors.DeviceError("numpy_view: the tensor is not in host memory")
    arr = np.asarray(_ArrayView(h, np_dtype))
    if arr.dtype != np_dtype:  # bfloat16 arrives as raw 2-byte records
        arr = arr.view(np_dtype)
    return arr


def read(h, np_dtype):
    """A new numpy array with the tensor's values (works for any device)."""
    refuse_host_read("read")
    c = contiguous(h)
    out = np.empty(shape(c), dtype=np_dtype)
    if out.size:
        check(lib.hl_tensor_read(c, ffi.from_buffer(out), out.nbytes))
    return out


def write(h, arr):
    """Copies arr (C-ordered, of the tensor's numpy dtype and size) into the tensor's memory
    at once, also while a plan is being recorded: graph mode sets its inputs and its per-step
    values (learning rates, step counts) this way before each replay."""
    if arr.size:
        check(lib.hl_tensor_write(h, ffi.from_buffer(arr), arr.nbytes))


def scalar_writer(h, np_dtype):
    """A function writing one number into the 0-d tensor h (any device), rounded to np_dtype
    as numpy rounds: graph mode's per-step values are set this way before every replay, so it
    keeps its buffer and C pointer rather than building an array per call, and writes only a
    value that differs from the last one written (most steps repeat the learning rate)."""
    buf = np.zeros((), dtype=np_dtype)
    cbuf, nbytes, write_ = ffi.from_buffer(buf), buf.nbytes, lib.hl_tensor_write
    limit = float(np.finfo(np_dtype).max) if np_dtype.kind == "f" else 0.0
    last = [None]  # the value written last: a step whose value has not changed writes nothing

    def set_value(value):
        # (zero is always written: 0.0 == -0.0, and their signs can reach a result)
        if value == last[0] and value != 0:
            return
        last[0] = None  # a failed write below must not count as written
        if -limit <= value <= limit:
            buf[()] = value
        else:  # overflow to inf, nan, or an integer dtype: numpy's cast, without its warnings
            with np.errstate(over="ignore", invalid="ignore"):
                buf[()] = np.array(value, dtype=np.float64).astype(np_dtype)
        check(write_(h, cbuf, nbytes))
        last[0] = value
    return set_value


def from_numpy(arr, dtype_code, kind=0, index=0):
    """A new tensor holding a copy of arr (already of the matching numpy dtype)."""
    # not np.ascontiguousarray: it turns a 0-d array into a 1-d one
    arr = np.asarray(arr, order="C")
    h = empty(arr.shape, dtype_code, kind, index)
    if arr.size:
        check(lib.hl_tensor_write(h, ffi.from_buffer(arr), arr.nbytes))
    return h


# ---- graph mode's host-read guard ---------------------------------------------------------

_plan_tls = threading.local()


def set_recording(on):
    """hl.graph marks the thread while it records a plan (around plan_begin / plan_end)."""
    _plan_tls.on = bool(on)


def recording():
    """True while graph mode records a plan on this thread (values of tensors written by
    recorded calls do not exist yet: reading them on the host is refused)."""
    return getattr(_plan_tls, "on", False)


def refuse_host_read(what):
    """Raises hl.errors.GraphBreak when `what` (a host read) happens while recording."""
    if getattr(_plan_tls, "on", False):
        raise errors.GraphBreak(
            f"{what}: reading a tensor's values on the host while a plan is being recorded "
            f"(graph mode) would read values not computed yet; graph mode runs such a step "
            f"eagerly", op=what)


def to_device(h, kind, index):
    p = _new_out("hl_tensor *[1]")
    check(lib.hl_tensor_to_device(h, (kind, index), p))
    return _own(p[0])


# ---- calls ------------------------------------------------------------------------------

class _Out:
    """Marks an output argument in ``call``: the core fills it with a new tensor (or, when
    ``into`` is a handle, writes into that tensor)."""

    __slots__ = ("into",)

    def __init__(self, into=None):
        self.into = into


OUT = _Out()


def out(into=None):
    return _Out(into)


_functions = {}


def _function(fn_name):
    fn = _functions.get(fn_name)
    if fn is None:
        fn = _functions[fn_name] = getattr(lib, "hl_" + fn_name)
    return fn


def call(fn_name, *args):
    """Calls hl_<fn_name>(*args); None becomes NULL and each OUT argument becomes an output
    slot. Returns the output handles (a single one, or a tuple when there are several)."""
    fn = _function(fn_name)
    cargs = list(args)
    slots = []
    for i, a in enumerate(cargs):
        if a is None:
            cargs[i] = _NULL
        elif type(a) is _Out:
            p = _new_out("hl_tensor *[1]")
            if a.into is not None:
                p[0] = a.into
            slots.append(p)
            cargs[i] = p
    st = fn(*cargs)
    if st:
        raise_status(st)
    if len(slots) == 1:
        return _gc(slots[0][0], _release)
    return tuple(_gc(p[0], _release) if p[0] != _NULL else None for p in slots)


def cast(h, dtype_code):
    """A new tensor: h's values in dtype_code (a copy when the dtype is h's): call("cast",
    ...) without its generic argument handling, for graph mode's per-step output copies."""
    p = _new_out("hl_tensor *[1]")
    st = lib.hl_cast(h, dtype_code, p)
    if st:
        raise_status(st)
    return _gc(p[0], _release)


def call_many_out(fn_name, n, *args):
    """Calls a core function whose last argument is an array of n output tensors."""
    fn = _function(fn_name)
    outs = _new_out(f"hl_tensor *[{max(n, 1)}]")
    check(fn(*[_NULL if a is None else a for a in args], outs))
    return [_own(outs[i]) for i in range(n)]


def computes(h, op):
    """Whether the backend of h's device has a kernel for op (a code) in h's dtype."""
    return bool(lib.hl_device_computes(lib.hl_tensor_device(h), op, lib.hl_tensor_dtype(h)))


def optim_update(rule, flags, param, grad, states, scalars, values, hyper, skip=None):
    """hl_optim_update: the per-step values are the 0-d tensors scalars, or (scalars None)
    the numbers values; skip: a 0-d bool tensor (nothing is written when it is true) or
    NULL."""
    n = len(scalars) if scalars is not None else len(values)
    check(lib.hl_optim_update(
        rule, flags, param, grad, ffi.new("hl_tensor *[]", states) if states else _NULL,
        len(states), ffi.new("hl_tensor *[]", scalars) if scalars is not None else _NULL,
        ffi.new("double[]", values) if scalars is None else _NULL, n,
        ffi.new("double[]", hyper), len(hyper), _NULL if skip is None else skip))


def tensor_array(handles):
    """A C array of tensor handles (for concat); keep the result alive during the call."""
    return ffi.new("hl_tensor *[]", list(handles))


# The hot paths get their own functions: one core call, no generic argument handling.

def unary(op, h, alpha=0.0, beta=0.0, into=None):
    p = _new_out("hl_tensor *[1]")
    if into is not None:
        p[0] = into
    st = lib.hl_unary(op, h, alpha, beta, p)
    if st:
        raise_status(st)
    return _gc(p[0], _release)


def binary(op, a, b, into=None):
    p = _new_out("hl_tensor *[1]")
    if into is not None:
        p[0] = into
    st = lib.hl_binary(op, a, b, p)
    if st:
        raise_status(st)
    return _gc(p[0], _release)


def matmul(a, b, into=None):
    p = _new_out("hl_tensor *[1]")
    if into is not None:
        p[0] = into
    st = lib.hl_matmul(a, b, p)
    if st:
        raise_status(st)
    return _gc(p[0], _release)


def contiguous(h):
    p = _new_out("hl_tensor *[1]")
    check(lib.hl_contiguous(h, p))
    return _own(p[0])


def copy_into(dst, src):
    check(lib.hl_copy(dst, src))


def fill(h, value):
    check(lib.hl_fill(h, float(value)))


# The fewest 2x2 output tiles for which a convolution takes Winograd on kernels packed by
# conv_pack (hl.onnx packs a 3x3 weight only for calls that reach it).
WINOGRAD_PACKED_MIN_TILES = lib.HL_WINOGRAD_PACKED_MIN_TILES
# The packed Winograd products take tiles in strips of this many (a strip costs the same
# however many of its tiles are real).
WINOGRAD_STRIP_TILES = lib.HL_WINOGRAD_NR

# ---- plans (graph mode at the C level) --------------------------------------------------
# A plan records the core calls made on this thread between plan_begin() and plan_end() and
# replays them with plan_run(). hl.graph (the Python side of graph mode) builds on these.

PLAN_NO_MEMORY = lib.HL_PLAN_NO_MEMORY
PLAN_NO_IN_PLACE = lib.HL_PLAN_NO_IN_PLACE
PLAN_NO_FUSION = lib.HL_PLAN_NO_FUSION
PLAN_TOPOLOGICAL = lib.HL_PLAN_TOPOLOGICAL
PLAN_NO_CAPTURE = lib.HL_PLAN_NO_CAPTURE
PLAN_NO_RECOMPUTE = lib.HL_PLAN_NO_RECOMPUTE
PLAN_NO_NORM_FUSION = lib.HL_PLAN_NO_NORM_FUSION
PLAN_NO_SLICES = lib.HL_PLAN_NO_SLICES


def plan_begin():
    """Starts recording: until plan_end(), core entry points called on this thread check their
    arguments, allocate their outputs and record the call instead of running it. Reading a
    value the recording will compute (numpy(), item()) raises UnsupportedError meanwhile."""
    check(lib.hl_plan_begin())


def plan_end():
    """Stops recording and returns the plan, an opaque handle released when collected."""
    p = _new_out("hl_plan *[1]")
    check(lib.hl_plan_end(p))
    return _gc(p[0], lib.hl_plan_release)


def plan_recording():
    """True while a plan is being recorded on this thread."""
    return bool(lib.hl_plan_recording())


def plan_input(h):
    """While recording: declares tensor handle h an input slot; returns the slot number."""
    slot = _new_out("int64_t *")
    check(lib.hl_plan_input(h, slot))
    return slot[0]


def plan_bind(plan, slot, h):
    """Makes the plan's next replays read tensor h at input slot `slot` (same shape, dtype
    and device as recorded; no copy when the strides match too)."""
    check(lib.hl_plan_bind(plan, slot, h))


def plan_bind_host(plan, slot, array):
    """Makes the plan's next replays read `array` (a C-contiguous, aligned numpy array of the
    slot's shape and dtype) in place at CPU input slot `slot`; the caller keeps the array
    alive and unchanged until the slot is bound again."""
    check(lib.hl_plan_bind_host(plan, slot, ffi.from_buffer(array), array.nbytes))


def plan_take_output(plan, h):
    """The values of the plan's output h after its last replay, as a new tensor handle: h's
    own memory when only the plan views it (h gets fresh memory for the next replays), else
    a copy. Returns (handle, handed_over)."""
    p = _new_out("hl_tensor *[1]")
    handed = ffi.new("int *")
    check(lib.hl_plan_take_output(plan, h, p, handed))
    return _own(p[0]), bool(handed[0])


def plan_link_inputs(plan, later):
    """Makes plan `later` (recorded after `plan`, reading its input slots) follow plan's
    binds; call it before the first bind."""
    check(lib.hl_plan_link_inputs(plan, later))


def plan_set_options(plan, options):
    """PLAN_* bits, before the first run: turn off planned memory, in-place writes or fusion,
    or choose the topological scheduler."""
    check(lib.hl_plan_set_options(plan, options))


def plan_run(plan):
    """Replays the plan's calls (the GIL is released while they run)."""
    check(lib.hl_plan_run(plan))


def handle_address(h):
    """The address of the C tensor behind handle h (stable while anything holds it)."""
    return int(ffi.cast("uintptr_t", h))


def plan_size(plan):
    """The number of calls in the plan."""
    return lib.hl_plan_size(plan)


def plan_set_profiling(plan, on, skip=0):
    """Switches per-record timing of the plan's replays on (the next `skip` replays untimed)
    or off; the totals are kept (plan_profile_reset clears them)."""
    check(lib.hl_plan_set_profiling(plan, 1 if on else 0, int(skip)))


def plan_profile(plan):
    """(timed replays, ops, first, ns): per record its op name, the first record of its
    fused group (its own index when not fused) and its nanoseconds over the timed replays."""
    n = lib.hl_plan_size(plan)
    timed = _new_out("int64_t *")
    ops, first, ns = (_new_out("int32_t[]", n), _new_out("int64_t[]", n),
                      _new_out("int64_t[]", n))
    check(lib.hl_plan_profile(plan, timed, ops, first, ns, n))
    return timed[0], [OP_NAMES[o] for o in ops], list(first), list(ns)


def plan_profile_reset(plan):
    check(lib.hl_plan_profile_reset(plan))


_PLAN_INFO_FIELDS = ("calls", "inputs", "prepared", "memory_planned", "arena_bytes",
                     "alive_peak_bytes", "scratch_bytes", "planned_tensors",
                     "planned_bytes", "in_place", "fused_groups", "fused_calls",
                     "conv_epilogues", "norm_fusions", "pool_fusions", "outer_updates",
                     "recomputed", "graphs", "graph_calls", "graph_launches",
                     "uncaptured_calls", "sliced_runs", "sliced_calls", "expand_dw")


def plan_stats(plan):
    """What the plan did before its replays: fused groups (from the first), the memory plan
    (arena bytes, planned tensors, in-place calls, kernel scratch: from the second; the first
    measures the kernels' work buffers), device graphs (captured at the second replay on a
    device that captures: graphs, the calls in them, launches, the calls left uncaptured and
    ``capture_note``, why the first of those is)."""
    info = _new_out("hl_plan_info *")
    check(lib.hl_plan_stats(plan, info))
    stats = {name: getattr(info, name) for name in _PLAN_INFO_FIELDS}
    stats["capture_note"] = ffi.string(info.capture_note).decode("utf-8", "replace")
    return stats
