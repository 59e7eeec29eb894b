"""Comparing an hl layer with its torch.nn twin: the same weights copied across, the same
input, the same output gradient; outputs, input gradients and parameter gradients must agree.

``mapping`` names, for each hl state (parameter or buffer), the torch attribute it comes
from and how to turn torch's array into hl's layout (identity unless given; Linear's weight
is transposed, hl storing W as (in, out)).
"""
import numpy as np

import hl


def build(layer, *xs):
    """Calls the layer once (creating its parameters), recording nothing."""
    with hl.no_grad():
        return layer(*[hl.tensor(x) for x in xs])


def _torch_attr(tmod, path):
    obj = tmod
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _split(spec):
    return spec if isinstance(spec, tuple) else (spec, lambda a: a)


def copy_states(layer, tmod, mapping):
    """Loads torch's tensors into the hl layer (strictly: every hl state must be mapped)."""
    values = {}
    for name, spec in mapping.items():
        tname, to_hl = _split(spec)
        values[name] = np.ascontiguousarray(to_hl(_torch_attr(tmod, tname).detach().numpy()))
    layer.set_states(values)


def compare(layer, tmod, x, mapping, rtol=1e-4, atol=1e-5, seed=0, grad_input=True):
    """Builds `layer` on x, copies torch's states in, then checks forward and backward.
    Returns the hl output (a Tensor) for further checks."""
    import torch
    build(layer, x)
    copy_states(layer, tmod, mapping)
    rng = np.random.default_rng(seed)
    x_hl = hl.tensor(x, requires_grad=grad_input)
    y = layer(x_hl)
    xt = torch.tensor(x, requires_grad=grad_input)
    yt = tmod(xt)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=rtol, atol=atol,
                               err_msg="forward")
    dy = rng.standard_normal(yt.shape).astype(np.float32)
    y.backward(hl.tensor(dy))
    yt.backward(torch.tensor(dy))
    if grad_input:
        np.testing.assert_allclose(x_hl.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg="gradient of the input")
    params = layer.get_params()
    for name, spec in mapping.items():
        if name not in params:
            continue  # a buffer
        tname, to_hl = _split(spec)
        tg = _torch_attr(tmod, tname).grad
        assert params[name].grad is not None, f"{name} got no gradient"
        np.testing.assert_allclose(params[name].grad.numpy(), to_hl(tg.numpy()), rtol=rtol,
                                   atol=atol, err_msg=f"gradient of {name}")
    return y
