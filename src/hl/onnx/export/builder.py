"""The Builder export rules write with: values (Val), constants, nodes and the small idioms
(casts, reductions, reshapes, dims read from a running tensor's Shape) every rule needs."""
import numpy as np
from onnx import helper, numpy_helper

from ... import dtypes as _dt
from ... import errors
from ..types import onnx_type


DEFAULT_OPSET = 17
MIN_OPSET = 13  # the first opset with Squeeze/Unsqueeze/ReduceSum/Split sizes as inputs


def _host(t):
    return np.asarray(t.cpu().numpy() if hasattr(t, "cpu") else t.numpy())


# ---- values and the graph being built ------------------------------------------------------

class Val:
    """A value of the graph: its ONNX name, traced shape, dtype and per-dim signature (an int
    for a fixed size, (size in trace 1, size in trace 2) for a dynamic one)."""
    __slots__ = ("name", "shape", "dtype", "sig")

    def __init__(self, name, shape, dtype, sig=None):
        self.name, self.shape, self.dtype = name, tuple(shape), _dt.dtype(dtype)
        self.sig = tuple(sig) if sig is not None else self.shape

    @property
    def ndim(self):
        return len(self.shape)

    def dynamic(self, d):
        return not isinstance(self.sig[d], int)

    @property
    def static(self):
        return all(isinstance(s, int) for s in self.sig)

    def __repr__(self):
        return f"Val({self.name!r}, {self.sig}, {self.dtype.name})"


class Attrs:
    """An op's arguments as export rules read them: its recorded arguments first, then the
    Function itself (class attributes, methods)."""

    def __init__(self, fn, cfg):
        self.__dict__["_fn"], self.__dict__["_cfg"] = fn, cfg

    def __getattr__(self, name):
        cfg = self.__dict__["_cfg"]
        if name in cfg:
            return cfg[name]
        return getattr(self.__dict__["_fn"], name)


class Builder:
    """The graph under construction: nodes, initializers and the helpers export rules use.
    Rules name their final outputs as given (``ys[i].name``); everything else gets a
    temporary name, renamed after the node that makes it once the graph is complete."""

    def __init__(self, opset, names=None):
        self.opset = opset
        self.names = names or {}  # id(tensor) -> a name for its initializer
        self.nodes = []        # NodeProto, in order
        self.node_layers = []  # the layer path (or None) each node was made under
        self.inits = []        # TensorProto
        self.taken = set()
        self.layer = None      # the layer of the op being translated
        self.op_name = None    # its Function's name, for messages
        self.vals = []         # every Val made, for finding a dynamic size's source
        self._temp = 0
        self._consts = {}      # (dtype, shape, bytes) -> name, for small constants
        self._leaves = {}      # id(tensor) -> Val
        self._shape_slices = {}
        self.varying = set()   # arguments of the current op that differ between the traces
        self.recorded = False  # True for SINGA's form: arguments read after forward ran

    # ---- names and values ----------------------------------------------------------------

    def temp(self):
        self._temp += 1
        return f"%{self._temp}"

    def unique(self, name):
        base, k = name, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def val(self, name, shape, dtype, sig=None):
        v = Val(name, shape, dtype, sig)
        self.vals.append(v)
        return v

    def leaf(self, t):
        """The initializer for a tensor that no traced op made (a parameter, a buffer, a
        constant): named after the tensor when it has a name."""
        v = self._leaves.get(id(t))
        if v is not None:
            return v
        a = _host(t)
        given = self.names.get(id(t)) or t.name
        if isinstance(given, str) and given:
            name = self.unique(given)
            self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
        else:
            name = self.const(a)
        v = self._leaves[id(t)] = self.val(name, a.shape, t.dtype)
        return v

    def const(self, value, dtype=None, name=None):
        """An initializer holding ``value`` (numpy dtype ``dtype`` if given); small unnamed
        ones are shared."""
        a = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        if name is not None:
            name = self.unique(name)
            self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
            return name
        key = None
        if a.size <= 64:
            key = (str(a.dtype), a.shape, a.tobytes())
            if key in self._consts:
                return self._consts[key]
        name = self.unique("const")
        self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
        if key is not None:
            self._consts[key] = name
        return name

    def ints(self, values):
        """A 1-D int64 constant (axes, sizes, pads)."""
        return self.const(np.asarray([int(v) for v in values], dtype=np.int64))

    def scalar(self, value, dtype):
        """A 0-d constant of the hl dtype ``dtype``."""
        return self.const(np.asarray(value, dtype=_dt.dtype(dtype).np))

    # ---- nodes ---------------------------------------------------------------------------

    def node(self, op_type, inputs, n=1, out=None, **attrs):
        """Appends a node; returns its output names (``out`` names them, else temporaries)."""
        outs = list(out) if out is not None else [self.temp() for _ in range(n)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outs, **attrs))
        self.node_layers.append(self.layer)
        return outs

    def op(self, op_type, inputs, out=None, **attrs):
        """Appends a one-output node and returns the output's name."""
        return self.node(op_type, inputs, out=None if out is None else [out], **attrs)[0]

    def cast(self, name, dtype, out=None):
        return self.op("Cast", [name], out=out, to=onnx_type(dtype))

    def reduce(self, op_type, x, axes, keepdims, out=None):
        """Reduce<op_type> over ``axes`` (a list; None for all), as each opset spells it:
        axes an input for ReduceSum from 13 and for the others from 18."""
        if axes is not None and not axes:
            return self.op("Identity", [x], out=out)  # hl reduces over no axis: a copy
        if op_type == "ReduceSum" or self.opset >= 18:
            ins = [x] + ([self.ints(axes)] if axes is not None else [])
            return self.op(op_type, ins, out=out, keepdims=int(keepdims))
        return self.op(op_type, [x], out=out, keepdims=int(keepdims),
                       axes=None if axes is None else [int(a) for a in axes])

    def squeeze(self, x, axes, out=None):
        return self.op("Squeeze", [x, self.ints(axes)], out=out)

    def unsqueeze(self, x, axes, out=None):
        return self.op("Unsqueeze", [x, self.ints(axes)], out=out)

    # ---- sizes that change with the dynamic axes -------------------------------------------

    def error(self, message, kind=None):
        where = f"{self.op_name}" + (f" in layer '{self.layer}'" if self.layer else "")
        return (kind or errors.UnsupportedError)(f"to_onnx: {where}: {message}")

    def varies(self, *names):
        """Did any of these arguments of the current op change between the two traces?
        (Asking marks them handled; an unhandled change is an error.)"""
        hit = self.varying.intersection(names)
        self.varying.difference_update(names)
        return bool(hit)

    def dim(self, sig, prefer=()):
        """A 1-element int64 tensor holding a dynamic size: a slice of Shape of the first
        value (``prefer`` first, then every value made so far) that has a dimension with the
        same signature."""
        for v in list(prefer) + self.vals:
            if v is None:
                continue
            for j, s in enumerate(v.sig):
                if s == sig:
                    return self.shape_slice(v, j)
        raise self.error(f"a size that changes with the dynamic axes ({sig[0]}, then {sig[1]}) "
                         f"is not the size of any value hl could read it from")

    def shape_slice(self, v, j):
        key = (v.name, j)
        if key not in self._shape_slices:
            if self.opset >= 15:
                s = self.op("Shape", [v.name], start=j, end=j + 1)
            else:
                s = self.op("Gather", [self.op("Shape", [v.name]), self.ints([j])], axis=0)
            self._shape_slices[key] = s
        return self._shape_slices[key]

    def shape_tensor(self, sig, prefer=()):
        """A 1-D int64 tensor of the sizes ``sig``: a constant when every size is fixed, else
        the fixed parts and Shape slices concatenated."""
        if all(isinstance(s, int) for s in sig):
            return self.ints(sig)
        parts, run = [], []
        for s in sig:
            if isinstance(s, int):
                run.append(s)
                continue
            if run:
                parts.append(self.ints(run))
                run = []
            parts.append(self.dim(s, prefer))
        if run:
            parts.append(self.ints(run))
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=0)

    def reshape(self, x, y, out=None):
        """Reshape of value ``x`` to the shape of value ``y``: fixed sizes written out, a
        dynamic size kept from x's same axis (0) where it is the same size, one other
        dynamic size left to Reshape (-1), any further ones read from Shape."""
        target, open_ = [], []
        for i, s in enumerate(y.sig):
            if isinstance(s, int):
                target.append(s)
            elif i < x.ndim and x.sig[i] == s:
                target.append(0)
            else:
                target.append(None)
                open_.append(i)
        fixed_zero = any(isinstance(s, int) and s == 0 for s in y.sig)
        if fixed_zero:  # a real 0 would read as "copy" unless allowzero
            if y.static:
                if self.opset < 14:
                    raise self.error(f"reshaping to {y.shape}, which has a 0 size, needs "
                                     f"Reshape's allowzero (opset 14 or later)")
                return self.op("Reshape", [x.name, self.ints(y.shape)], out=out, allowzero=1)
            raise self.error(f"reshaping to {y.shape} mixes a 0 size with dynamic ones")
        if len(open_) == 1:
            target[open_[0]] = -1
        if all(t is not None for t in target):
            return self.op("Reshape", [x.name, self.ints(target)], out=out)
        sig = [s if t is None else t for s, t in zip(y.sig, target)]
        return self.op("Reshape", [x.name, self.shape_tensor(sig, [x])], out=out)
