"""Names and dynamic axes of an export's inputs and outputs: outputs flattened from whatever
forward returns, names checked for repeats, ``dynamic_axes`` read and checked."""
import numpy as np

from ... import errors
from ..._tensor import Tensor
from ...autograd import Placeholder


def _output_names(outs, given):
    if given is not None:
        names = list(given)
        if len(names) != len(outs):
            raise errors.ValueError(f"to_onnx: {len(names)} output_names for {len(outs)} "
                                    f"outputs")
        return _unique_names(names, "output_names")
    return ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]


def _unique_names(names, what):
    for n in names:
        if not isinstance(n, str) or not n:
            raise errors.ValueError(f"to_onnx: {what} must be non-empty strings, got {n!r}")
    if len(set(names)) != len(names):
        raise errors.ValueError(f"to_onnx: {what} {names} repeat a name")
    return names


def _flatten_outputs(out, where):
    """forward's result as a flat list of tensors (tuples, lists and dicts opened, None
    skipped: LSTM's (y, (h, c)) gives [y, h, c])."""
    flat = []

    def walk(o):
        if o is None:
            return
        if isinstance(o, (Tensor, Placeholder)):
            flat.append(o)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        else:
            raise errors.UnsupportedError(f"to_onnx: {where} returned a {type(o).__name__}; "
                                          f"only tensors (in tuples, lists, dicts) can be "
                                          f"graph outputs")
    walk(out)
    if not flat:
        raise errors.ValueError(f"to_onnx: {where} returned no tensor")
    return flat


# ---- dynamic axes --------------------------------------------------------------------------

def _axes_spec(spec, key):
    """{axis: name} from {axis: name} or [axes] (named "<key>_dim<axis>")."""
    if isinstance(spec, dict):
        out = {}
        for a, n in spec.items():
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or \
                    not isinstance(n, str) or not n:
                raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must map axes (ints) "
                                        f"to names (strings), got {spec!r}")
            out[int(a)] = n
        return out
    if isinstance(spec, (list, tuple)):
        for a in spec:
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must list axes "
                                        f"(ints), got {spec!r}")
        return {int(a): f"{key}_dim{int(a)}" for a in spec}
    raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must be {{axis: name}} or a list "
                            f"of axes, got {type(spec).__name__}")


def _split_dynamic(dynamic_axes, in_names, examples):
    """({input index: {axis: name}}, {output name: {axis: name}}), input axes checked."""
    if dynamic_axes is None:
        return {}, {}
    if not isinstance(dynamic_axes, dict):
        raise errors.ValueError(f"to_onnx: dynamic_axes must be a dict {{name: {{axis: "
                                f"dim_name}}}}, got {type(dynamic_axes).__name__}")
    dyn_in, dyn_out = {}, {}
    sizes = {}
    for key, spec in dynamic_axes.items():
        axes = _axes_spec(spec, key)
        if key in in_names:
            i = in_names.index(key)
            nd = len(examples[i].shape)
            norm = {}
            for a, n in axes.items():
                if not -nd <= a < nd:
                    raise errors.IndexError(f"to_onnx: dynamic axis {a} of input {key!r} is out "
                                            f"of range for its shape {tuple(examples[i].shape)}")
                a %= nd
                norm[a] = n
                size = examples[i].shape[a]
                if sizes.setdefault(n, (size, key))[0] != size:
                    raise errors.ShapeError(
                        f"to_onnx: dynamic axis {n!r} is {sizes[n][0]} in input "
                        f"{sizes[n][1]!r} but {size} in input {key!r}")
            dyn_in[i] = norm
        else:
            dyn_out[key] = axes  # checked against the outputs once they are known
    return dyn_in, dyn_out


def _check_dynamic_outputs(dyn_out, out_names, outs):
    for key, axes in list(dyn_out.items()):
        if key not in out_names:
            raise errors.ValueError(f"to_onnx: dynamic_axes names {key!r}, which is neither an "
                                    f"input nor an output; the outputs are {out_names}")
        nd = len(outs[out_names.index(key)].shape)
        for a in axes:
            if not -nd <= a < nd:
                raise errors.IndexError(f"to_onnx: dynamic axis {a} of output {key!r} is out "
                                        f"of range for its {nd} dimensions")
        dyn_out[key] = {a % nd: n for a, n in axes.items()}


def _grown(first, in_names, dyn_in):
    """The second trace's inputs: each dynamic axis larger by a step that differs per axis
    name, so two dynamic sizes that happen to be equal are still told apart."""
    order = []
    for i in sorted(dyn_in):
        for a in sorted(dyn_in[i]):
            if dyn_in[i][a] not in order:
                order.append(dyn_in[i][a])
    specs = []
    for i, p in enumerate(first):
        shape = list(p.shape)
        for a, n in dyn_in.get(i, {}).items():
            shape[a] += order.index(n) + 1
        specs.append(Placeholder(tuple(shape), p.dtype, p.device))
    return specs
