"""hl.Model: Keras's Model, in both of its forms.

Subclassed (SINGA's ``class MyModel(hl.model.Model)`` too): Model is a Module.

Functional: ``hl.Model(inputs=x, outputs=y)`` on the symbolic tensors of hl.Input and of
layer calls (hl/layers/symbolic.py) returns a Functional model: a Module whose forward
replays the recorded layer calls, in order, on real tensors. Inputs and outputs may be one
tensor, a list, or a dict by name; a layer called at several places (shared) owns its
parameters once. Its sub-layers are named by their ``name`` or, unnamed, by their class
in snake case with a count (``linear``, ``linear_1``), as Keras names them, so two models
built by the same code get the same parameter names (save_states / load_states across
runs).
"""
from .. import errors
from ..layers.symbolic import SymbolicTensor, flatten, substitute
from .module import Module
from .summary import snake_case


class Model(Module):
    """Subclass it (Keras's and SINGA's way) or call it with ``inputs=`` and ``outputs=``
    (the functional API, which makes a Functional)."""

    def __new__(cls, *args, **kwargs):
        if cls is Model and _functional_call(args, kwargs):
            return super().__new__(Functional)
        return super().__new__(cls)

    def __init__(self, *args, name=None, **kwargs):
        if args or kwargs:
            raise errors.ValueError(
                f"{type(self).__name__}: Model(inputs=..., outputs=...) takes hl.Input tensors "
                f"and the results of layer calls on them; a subclass calls "
                f"super().__init__() (or super().__init__(name=...))")
        super().__init__(name)


def _functional_call(args, kwargs):
    return "inputs" in kwargs or "outputs" in kwargs or (
        len(args) >= 2 and all(type(t) is SymbolicTensor for t in flatten(args[:2])))


class Functional(Model):
    _is_graph_network = True  # as Keras's flag: summary lists inputs and connections

    def __init__(self, inputs=None, outputs=None, name=None):
        Module.__init__(self, name)
        if inputs is None or outputs is None:
            raise errors.ValueError("Model: the functional form needs both inputs= and "
                                    "outputs=")
        in_list, out_list = flatten(inputs), flatten(outputs)
        for what, ts in (("inputs", in_list), ("outputs", out_list)):
            bad = [type(t).__name__ for t in ts if type(t) is not SymbolicTensor]
            if bad or not ts:
                raise errors.ValueError(
                    f"Model: {what} must be hl.Input tensors and results of layer calls on "
                    f"them (one, a list or a dict), received {bad or 'nothing'}")
        for t in in_list:
            if t.node is not None:
                raise errors.ValueError(f"Model: every input must come from hl.Input, but "
                                        f"{t!r} is the output of {t.node.layer.describe()}")
        d = self.__dict__
        d["_inputs"], d["_outputs"] = inputs, outputs
        d["_input_list"], d["_output_list"] = in_list, out_list
        d["_nodes"] = _ordered_nodes(in_list, out_list)
        d["_children"] = _name_layers(self._nodes)
        for local, layer in self._children:
            layer.__dict__["_parent"] = self
            layer.__dict__["_local_name"] = local
        d["_built"] = True  # every layer was built when it was called on symbolic tensors
        self.get_states()  # names the tensors (built before they had a parent) by their path

    # ---- what a Module asks ------------------------------------------------------------

    @property
    def inputs(self):
        return self._input_list

    @property
    def outputs(self):
        return self._output_list

    def named_children(self):
        return iter(self._children)

    def forward(self, *args, **kwargs):
        values = {}
        for t, v in zip(self._input_list, self._bind(args, kwargs)):
            values[id(t)] = v
        for node in self._nodes:
            out = node.layer(*substitute(node.args, values), **substitute(node.kwargs, values))
            for sym, real in zip(node.outputs, _outputs_of(node.structure, out)):
                values[id(sym)] = real
        return substitute(self._outputs, values)

    def _bind(self, args, kwargs):
        """The call's arguments matched with the inputs: positionally, as one list, or by
        the inputs' names (keywords or one dict)."""
        n = len(self._input_list)
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            args, kwargs = (), args[0]
        if len(args) == 1 and not kwargs and isinstance(args[0], (list, tuple)) and n > 1:
            args = tuple(args[0])
        if kwargs:
            names = [t.name for t in self._input_list]
            if args or set(kwargs) != set(names):
                raise errors.ValueError(f"{self.describe()}: inputs by name must be exactly "
                                        f"{names}, received {sorted(kwargs)}")
            return [kwargs[name] for name in names]
        if len(args) != n:
            raise errors.ValueError(f"{self.describe()}: expected {n} input(s) "
                                    f"{[t.shape for t in self._input_list]}, received "
                                    f"{len(args)}")
        for t, a in zip(self._input_list, args):
            shape = getattr(a, "shape", None)
            if shape is not None and (len(shape) != len(t.shape) or any(
                    want is not None and want != got for want, got in zip(t.shape, shape))):
                raise errors.ShapeError(
                    f"{self.describe()}: input {t.name or self._input_list.index(t)} expects "
                    f"shape {t.shape} (None: any size), received {tuple(shape)}")
        return list(args)

    def _runs_step(self, xs, kwargs):
        return False  # model(a, b) is always the forward pass of a two-input model

    def input_placeholders(self):
        """One hl.Placeholder per input (unknown axes of size 1): compile and to_onnx take
        them as example inputs."""
        return [t.placeholder(unknown=1) for t in self._input_list]

    def extra_repr(self):
        return f"inputs={[t.shape for t in self._input_list]}"


def _outputs_of(structure, out):
    """The real outputs of a replayed call, in the order of the node's symbolic outputs."""
    if type(structure) is SymbolicTensor:
        return [out]
    if isinstance(structure, (list, tuple)):
        return [r for s, o in zip(structure, out) for r in _outputs_of(s, o)]
    if isinstance(structure, dict):
        return [r for k, s in structure.items() for r in _outputs_of(s, out[k])]
    return []


def _ordered_nodes(inputs, outputs):
    """The nodes between inputs and outputs in an order that runs each after the nodes it
    reads (depth-first from the outputs), checking that every path starts at an input."""
    given = {id(t) for t in inputs}
    order, state = [], {}

    def visit(node):
        if state.get(id(node)) == "done":
            return
        state[id(node)] = "active"
        for t in node.inputs():
            if t.node is None:
                if id(t) not in given:
                    raise errors.ValueError(
                        f"Model: the outputs depend on the input {t!r}, which is not among "
                        f"the model's inputs; add it to inputs=")
            elif state.get(id(t.node)) != "done":
                visit(t.node)
        state[id(node)] = "done"
        order.append(node)

    for t in outputs:
        if t.node is None:
            if id(t) not in given:
                raise errors.ValueError(f"Model: the output {t!r} is an input not listed in "
                                        f"inputs=")
            continue
        visit(t.node)
    return order


def _name_layers(nodes):
    """(local name, layer) for each layer in the order of its first call: its own name, or
    its class in snake case numbered from the second on (linear, linear_1...)."""
    named, seen, counts, used = [], set(), {}, set()
    for node in nodes:
        layer = node.layer
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        if layer.name:
            local = layer.name
            if local in used:
                raise errors.ValueError(f"Model: two different layers are named {local!r}; "
                                        f"layer names must be unique in a model")
        else:
            # an operator on symbolic tensors is named by its function (getitem, add)
            base = getattr(layer, "fn_name", None) or snake_case(type(layer).__name__)
            k = counts.get(base, 0)
            local = base if k == 0 else f"{base}_{k}"
            while local in used:
                k += 1
                local = f"{base}_{k}"
            counts[base] = k + 1
        used.add(local)
        named.append((local, layer))
    return named


__all__ = ["Functional", "Model"]
