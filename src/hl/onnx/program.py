"""Program: a Graph ready to run on a device, and the loop that runs it.

Constant subgraphs (nodes whose inputs are all initializers or other constants) are run once,
when the program is built, and their outputs kept: the Shape/Gather/Concat chains exporters
write around Reshape then cost nothing per run. Initializers that the caller makes trainable
(ONNXModel's parameters) are not constants, so nothing downstream of them is folded.
"""
import threading

import numpy as np

from .. import errors
from .._tensor import Tensor
from ..autograd import is_grad_enabled, no_grad
from ..autograd.mode import trace_state as _trace
from .common_nodes import NO_FOLD, merge_common_nodes
from .graph import Graph, last_uses
from .types import elem_type_name
from .load import MALFORMED
from .planned import PlanCache, to_tensors

# Serialises restoring the weights kept only packed (Program.all_constants).
_RESTORE_LOCK = threading.Lock()

# How many input-shape signatures a program keeps the shape arithmetic of.
SHAPE_SIGNATURES = 4

# Ops whose output shapes depend on their inputs' data: a Shape of what they produce is not
# a function of the input signature (NonZero's row count changes with the values).
DATA_SHAPED = {"NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit",
               "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceConstruct",
               "SequenceInsert", "SequenceErase", "SequenceEmpty", "SequenceLength",
               "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement"}
# Ops whose output shapes follow from the values of these inputs (besides input shapes and
# attributes): their shapes are fixed by the signature only when those values are.
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
VALUE_SHAPED = {"Reshape": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4), "Tile": (1,),
                "Range": (0, 1, 2), "ConstantOfShape": (0,), "Pad": (1, 2, 3),
                "Resize": (1, 2, 3), "Upsample": (1,), "TopK": (1,), "Squeeze": (1,),
                "Unsqueeze": (1,), "OneHot": (1,), "Split": (1,), "CenterCropPad": (1,),
                "Col2Im": (1, 2), "MaxUnpool": (2,), "DFT": (1, 2), "STFT": (2, 3),
                "MelWeightMatrix": (0, 1, 2, 3, 4), "BlackmanWindow": (0,),
                "HannWindow": (0,), "HammingWindow": (0,), "AffineGrid": (1,),
                **{op: (1,) for op in _REDUCE}}


class Program:
    def __init__(self, graph, device, constants, fold=True, fuse=False):
        """``fuse``: every weight is a constant (inference), so Conv + BatchNormalization
        pairs may run as one Conv, convolutions with their epilogues (fuse.py), products
        with a constant B on a packed B with theirs (fuse_matmul.py) and attention blocks as
        one kernel (fuse_attention.py), in plain runs."""
        self.graph = graph
        self.device = device
        # name -> Tensor; the caller's dict itself, so that a weight dropped here (kept only
        # packed) is freed at once and its memory reused by the next packing
        self.constants = constants
        self.packed_only = {}  # name -> (PackedMatrix, trans_b): see all_constants
        self.folded = set()
        _place(graph, device)
        if fold:
            self._fold()
        self.fused_nodes, self.fused_skip, self.fused_last_use = None, set(), None
        if fuse:
            from . import fuse as _fuse
            replace, self.fused_skip, extra = _fuse.conv_batchnorm(graph, self.constants,
                                                                   self.folded)
            if replace:
                self.constants.update(extra)
                self.fused_nodes = [replace.get(n.index, n) for n in graph.nodes]
            from .fuse_attention import attention_blocks
            from .fuse_matmul import matmul_epilogues
            for rewrite in (merge_common_nodes, _fuse.conv_epilogues, matmul_epilogues,
                            attention_blocks):
                extra = {"packed_only": self.packed_only} if rewrite is matmul_epilogues else {}
                nodes = rewrite(self.fused_nodes or graph.nodes, graph, self.constants, device,
                                self.folded | self.fused_skip, **extra)
                if nodes is not None:  # fused nodes read values later than the graph's nodes
                    self.fused_nodes = nodes
                    self.fused_last_use = last_uses(nodes, graph)
        for node in self.fused_nodes or ():
            if getattr(node, "packed_from", None) is not None:
                node.constant = self.constant  # the fallback's way to a dropped B
        self.shape_nodes, self.shape_values = self._shape_only_nodes(), {}
        self.plans = PlanCache(device)
        self.shape_outputs = {n for node in graph.nodes if node.index in self.shape_nodes
                              for n in node.outputs if n}

    def constant(self, name):
        """The constant ``name`` (a weight kept only packed is re-derived)."""
        t = self.constants.get(name)
        return t if t is not None else self.all_constants()[name]

    def all_constants(self):
        """``constants`` with every weight kept only packed restored, for good (the paths
        that need them are rare: intermediates asked for, fallbacks, export)."""
        if self.packed_only:
            with _RESTORE_LOCK:
                if self.packed_only:
                    restored = dict(self.constants)  # copy, change, swap (other threads read)
                    for name, (packed, trans_b) in self.packed_only.items():
                        restored[name] = packed.unpack(trans_b)
                    self.constants = restored
                    self.packed_only = {}
        return self.constants

    def _fold(self):
        known = self.constants
        for node in self.graph.nodes:
            if node.op_type in NO_FOLD or not node.outputs:
                continue
            reads = [n for n in node.inputs if n]
            from .graph import _subgraph_free_names
            reads += sorted(_subgraph_free_names(node.proto))
            if not all(n in known for n in reads):
                continue
            with no_grad():
                values = run_nodes([node], dict(known), training=False, folded=())
            for name in node.outputs:
                if name and name in values:
                    known[name] = values[name]
            self.folded.add(node.index)

    def _shape_only_nodes(self):
        """Nodes whose outputs depend on the inputs' shapes alone: Shape and Size, and what
        reads only their outputs and constants (the exporters' Gather/Unsqueeze/Concat chains
        around Reshape and Expand, Range for positions, even the position-embedding Gather).
        Their outputs are computed once per input-shape signature and kept (shape_values).
        A Shape reads a shape the signature fixes only when no op upstream shapes its output
        by data (NonZero, or a Reshape to a computed size): those run every time."""
        derived, nodes = set(self.constants), set()
        unfixed = set()  # values whose shape the input signature does not determine
        for node in self.graph.nodes:
            reads = [n for n in node.inputs if n]
            subgraph = any(isinstance(v, Graph) for v in node.attrs.values())
            by_value = [node.inputs[i] for i in VALUE_SHAPED.get(node.op_type, ())
                        if i < len(node.inputs) and node.inputs[i]]
            if subgraph or node.op_type in DATA_SHAPED or any(n in unfixed for n in reads) \
                    or any(n not in derived for n in by_value):
                unfixed.update(n for n in node.outputs if n)
            if node.index in self.folded or node.op_type in NO_FOLD or not node.outputs or \
                    subgraph:
                continue
            if (node.op_type in ("Shape", "Size") and reads and reads[0] not in unfixed) \
                    or all(n in derived for n in reads):
                nodes.add(node.index)
                derived.update(n for n in node.outputs if n)
        return nodes

    def run(self, feeds, params=None, training=False, stop=None, keep=(), keep_all=False,
            eval_nodes=()):
        """Runs the graph on ``feeds`` ({input name: Tensor, or a numpy array checked by
        check_feeds}) and returns {name: Tensor} for the graph outputs, ``keep`` and, with
        keep_all, every value. Nodes whose index is in ``eval_nodes`` run in inference mode
        even when ``training``. Plain inference runs (no gradient, no intermediates asked
        for) replay a plan per input signature (planned.py), which reads numpy inputs in
        place."""
        if not training and stop is None and not keep and not keep_all and \
                _trace.tracer is None and _no_gradient(feeds, params):
            return self.plans.run(feeds, params, lambda f: self._run(f, params),
                                  [o.name for o in self.graph.outputs])
        return self._run(to_tensors(feeds, self.device), params, training, stop, keep,
                         keep_all, eval_nodes)

    def _run(self, feeds, params=None, training=False, stop=None, keep=(), keep_all=False,
             eval_nodes=()):
        fused = self.fused_nodes is not None and stop is None and not keep and \
            not keep_all and not training
        values = dict(self.constants if fused else self.all_constants())
        if params:
            values.update(params)
        values.update(feeds)
        skip, last_use = self.folded, self.graph.last_use
        if fused:
            nodes, skip = self.fused_nodes, self.folded | self.fused_skip
            last_use = self.fused_last_use or last_use
        else:  # intermediates asked for: the graph as written, so each keeps its meaning
            nodes = self.graph.nodes if stop is None else self.graph.nodes[:stop + 1]
        keep = set(keep) | {o.name for o in self.graph.outputs}
        if stop is not None:
            keep |= {n for n in self.graph.nodes[stop].outputs if n}
        signature = None
        if self.shape_nodes and stop is None and not keep_all:
            signature = tuple((k, tuple(v.shape), v.dtype.name) for k, v in sorted(feeds.items())
                              if v is not None)
            known = self.shape_values.get(signature)
            if known is not None:  # the same shapes as before: reuse the shape arithmetic
                values.update(known)
                return run_nodes(nodes, values, training, skip | self.shape_nodes,
                                 last_use, keep, eval_nodes)
        outputs = self.shape_outputs if signature is not None else set()
        values = run_nodes(nodes, values, training, skip, last_use,
                           None if keep_all else keep | outputs, eval_nodes)
        if signature is not None:
            # copy, change, swap: another thread may be reading or iterating the cache
            cache = dict(self.shape_values)
            if len(cache) >= SHAPE_SIGNATURES:  # the oldest signature goes
                cache.pop(next(iter(cache)))
            cache[signature] = {n: values[n] for n in outputs if n in values}
            self.shape_values = cache
            for n in outputs - keep:
                values.pop(n, None)
        return values


def _no_gradient(feeds, params):
    """No tape would be recorded: gradients are off, or nothing given asks for one."""
    if not is_grad_enabled():
        return True
    given = list(feeds.values()) + list((params or {}).values())
    return not any(isinstance(t, Tensor) and t.requires_grad for t in given)



def _place(graph, device):
    """Tells every node, subgraphs' nodes included, the device the program runs on."""
    from .graph import Graph
    for node in graph.nodes:
        node.device = device
        for value in node.attrs.values():
            if isinstance(value, Graph):
                _place(value, device)


def run_nodes(nodes, values, training, folded, last_use=None, keep=None, eval_nodes=()):
    """Runs ``nodes`` in order over ``values`` (name -> Tensor, updated in place). Values
    read for the last time are dropped unless in ``keep`` (keep=None keeps everything)."""
    tracer = _trace.tracer  # hl.onnx.to_onnx tracing a model that holds this graph
    for node in nodes:
        if node.index in folded:
            continue
        xs = [values[name] if name else None for name in node.inputs]
        node.training = training and node.index not in eval_nodes
        node.scope = values
        try:
            if tracer is None:
                ys = node.handler(node, *xs)
            else:  # the ops a node runs are exported under the node's own name
                with tracer.scope(node.name):
                    ys = node.handler(node, *xs)
        except errors.HLError as e:
            if str(e).startswith("ONNX node"):
                raise
            raise type(e)(f"{node.describe()}: {e}") from e
        except MALFORMED as e:  # an attribute or input no handler check caught
            raise errors.ONNXError(f"ONNX node {node.describe()}: the node is malformed "
                                   f"({type(e).__name__}: {str(e)[:300]})") from None
        finally:
            node.scope = None
        if not isinstance(ys, (tuple, list)):
            ys = (ys,)
        for i, name in enumerate(node.outputs):
            if not name:
                continue
            if i >= len(ys) or ys[i] is None:
                raise errors.UnsupportedError(
                    f"{node.describe()}: output {i} ({name!r}) is not produced by hl's "
                    f"{node.op_type}")
            values[name] = ys[i]
        if keep is not None and last_use is not None:
            for name in node.inputs:
                if name and last_use.get(name) == node.index and name not in keep:
                    values.pop(name, None)
    return values


def check_feeds(graph, inputs, where):
    """The caller's inputs (a list in graph order, a dict by name, numpy arrays or hl
    tensors) as {name: Tensor or C-contiguous numpy array}, after checking their number,
    dtypes and shapes. Arrays stay arrays: a replayed plan reads them in place, other runs
    copy them into tensors (to_tensors)."""
    specs = graph.inputs
    if isinstance(inputs, dict):
        unknown = [k for k in inputs if k not in {s.name for s in specs}]
        if unknown:
            raise errors.ValueError(f"{where}: {unknown} are not inputs of the model; its "
                                    f"inputs are {[s.name for s in specs]}")
        missing = [s.name for s in specs if s.name not in inputs]
        if missing:
            raise errors.ValueError(f"{where}: missing inputs {missing}")
        pairs = [(s, inputs[s.name]) for s in specs]
    else:
        if isinstance(inputs, (np.ndarray, Tensor)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(specs):
            raise errors.ValueError(f"{where}: the model takes {len(specs)} inputs "
                                    f"({[s.name for s in specs]}), got {len(inputs)}")
        pairs = list(zip(specs, inputs))
    dims = {}
    feeds = {}
    for spec, x in pairs:
        if spec.optional and x is None:
            feeds[spec.name] = None
            continue
        if spec.elem_type is None:
            raise errors.UnsupportedError(
                f"{where}: input {spec.name!r} is not a tensor (a sequence, map or optional); "
                f"hl's importer takes tensors only")
        if not isinstance(x, Tensor):
            a = np.asarray(x)
            if spec.dtype is not None and a.dtype.kind == "O":
                raise errors.DTypeError(f"{where}: input {spec.name!r} is an object array")
            x = a
        dtype = str(x.dtype) if not isinstance(x, Tensor) else x.dtype.name
        if spec.elem_type is not None:
            want = spec.dtype
            if want is None:
                raise errors.UnsupportedError(
                    f"{where}: input {spec.name!r} has ONNX element type "
                    f"{elem_type_name(spec.elem_type)}, which hl cannot hold")
            if dtype != want:
                raise errors.DTypeError(f"{where}: input {spec.name!r} must be {want}, got "
                                        f"{dtype} (convert it with .astype({want!r}))")
        shape = tuple(x.shape)
        if spec.shape is not None:
            if len(shape) != len(spec.shape):
                raise errors.ShapeError(
                    f"{where}: input {spec.name!r} must have {len(spec.shape)} dimensions "
                    f"{_show(spec.shape)}, got shape {shape}")
            for d, (want, got) in enumerate(zip(spec.shape, shape)):
                if isinstance(want, int) and want > 0 and want != got:
                    raise errors.ShapeError(
                        f"{where}: input {spec.name!r} must have shape {_show(spec.shape)}, "
                        f"got {shape} (dimension {d} is {got}, not {want})")
                if isinstance(want, str):
                    if dims.setdefault(want, (got, spec.name))[0] != got:
                        raise errors.ShapeError(
                            f"{where}: dimension {want!r} is {dims[want][0]} in input "
                            f"{dims[want][1]!r} but {got} in input {spec.name!r}")
        if not isinstance(x, Tensor):
            x = np.ascontiguousarray(x).reshape(x.shape)  # reshape: keeps 0-d
        feeds[spec.name] = x
    return feeds


def _show(shape):
    return "(" + ", ".join(str(d) if d is not None else "?" for d in shape) + ")"
