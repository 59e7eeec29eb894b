"""Shared by the layer tests that compare with PyTorch: copy a torch module's weights into an
hl layer, run both on the same inputs, and compare outputs and every gradient."""
import numpy as np

import hl


def flatten(y):
    """A nested tuple of outputs as a flat list (None entries dropped)."""
    if y is None:
        return []
    if isinstance(y, (tuple, list)):
        return [t for part in y for t in flatten(part)]
    return [y]


def copy_weights(layer, module, rename):
    """Sets layer's parameters from module's, named rename(torch_name)."""
    values = {rename(k): v.detach().numpy() for k, v in module.named_parameters()}
    layer.set_params(values)


def compare(hl_fn, torch_fn, inputs, params, torch_params, rtol, atol, seed=0):
    """Runs hl_fn(*hl_inputs) and torch_fn(*torch_inputs) (inputs: float32 arrays, or None),
    backpropagates the same random gradients into every output, and compares outputs, input
    gradients and the gradient of each hl parameter with its torch twin (params and
    torch_params: dicts with the same keys)."""
    import torch

    rng = np.random.default_rng(seed)
    hx = [None if a is None else hl.tensor(a, requires_grad=True) for a in inputs]
    tx = [None if a is None else torch.tensor(a, requires_grad=True) for a in inputs]
    ys, ts = flatten(hl_fn(*hx)), flatten(torch_fn(*tx))
    assert len(ys) == len(ts)
    loss_h, loss_t = None, None
    for y, t in zip(ys, ts):
        assert tuple(y.shape) == tuple(t.shape), (y.shape, t.shape)
        np.testing.assert_allclose(y.numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
        dy = rng.standard_normal(t.shape).astype(np.float32)
        lh = (y * hl.tensor(dy)).sum()
        lt = (t * torch.tensor(dy)).sum()
        loss_h = lh if loss_h is None else loss_h + lh
        loss_t = lt if loss_t is None else loss_t + lt
    loss_t.backward()
    loss_h.backward()
    for i, (a, b) in enumerate(zip(hx, tx)):
        if a is None:
            continue
        assert a.grad is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")
    for name, p in params.items():
        assert p.grad is not None, f"parameter {name} got no gradient"
        np.testing.assert_allclose(p.grad.numpy(), torch_params[name].grad.numpy(),
                                   rtol=rtol, atol=atol, err_msg=f"gradient of {name}")
