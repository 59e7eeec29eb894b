"""Moving weights between hl and PyTorch, for the same architecture.

    python examples/torch_interop.py      (needs torch: pip install torch)

hl's ``get_states()`` is a dict {hierarchical name: Tensor}, like PyTorch's ``state_dict()``.
The two differ in three small ways, all handled by ``to_torch`` / ``from_torch`` below:
- names: hl calls parameters ``W``/``b`` (and batch norm ``scale``/``bias``), PyTorch
  ``weight``/``bias``; the layer part of the name (``0.``, ``conv1.``) is the same when both
  models use the same attribute names or the same Sequential positions;
- Linear: hl stores W as (in, out), as Keras and SINGA do; PyTorch as (out, in): transpose;
- batch norm: PyTorch also keeps ``num_batches_tracked``, which hl has no use for.
Convolution weights are (out, in, kh, kw) in both.

Through numpy files, no PyTorch needed:
    np.savez("w.npz", **{k: v.numpy() for k, v in model.get_states().items()})
    model.set_states(dict(np.load("w.npz")))
"""
import numpy as np

import hl
from hl import layers as L

_TO_TORCH = {"W": "weight", "b": "bias", "scale": "weight", "bias": "bias",
             "running_mean": "running_mean", "running_var": "running_var"}
_FROM_TORCH = {"weight": ("W", "scale"), "bias": ("b", "bias"),
               "running_mean": ("running_mean",), "running_var": ("running_var",)}


def to_torch(model):
    """hl model -> a state dict for the same PyTorch architecture (torch tensors)."""
    import torch
    out = {}
    for name, t in model.get_states().items():
        prefix, _, local = name.rpartition(".")
        value = t.numpy()
        if local == "W" and value.ndim == 2:
            value = value.T
        out[f"{prefix}.{_TO_TORCH[local]}"] = torch.from_numpy(np.ascontiguousarray(value))
    return out


def from_torch(model, state_dict):
    """Loads a PyTorch state dict into the hl model (built, same architecture)."""
    states = model.get_states()
    values = {}
    for name, tensor in state_dict.items():
        prefix, _, local = name.rpartition(".")
        if local == "num_batches_tracked":
            continue
        hl_name = next(f"{prefix}.{c}" for c in _FROM_TORCH[local] if f"{prefix}.{c}" in states)
        value = tensor.detach().cpu().numpy()
        if hl_name.endswith(".W") and value.ndim == 2:
            value = value.T
        values[hl_name] = value
    model.set_states(values)  # strict: a name or shape that does not match raises


def models():
    """The same small CNN in both libraries."""
    import torch.nn as nn
    ours = L.Sequential(L.Conv2d(8, 3, padding=1), L.BatchNorm2d(), L.ReLU(), L.MaxPool2d(2),
                        L.Flatten(), L.Linear(10))
    ours(hl.zeros(1, 1, 8, 8))
    theirs = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                           nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    return ours, theirs


def main():
    import torch
    ours, theirs = models()
    x = np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)
    ours.eval(), theirs.eval()

    theirs.load_state_dict(to_torch(ours))             # hl -> PyTorch
    a, b = ours(hl.tensor(x)).numpy(), theirs(torch.from_numpy(x)).detach().numpy()
    print(f"hl -> torch: largest difference {np.abs(a - b).max():.2e}")

    theirs = models()[1].eval()                          # PyTorch -> hl
    from_torch(ours, theirs.state_dict())
    a, b = ours(hl.tensor(x)).numpy(), theirs(torch.from_numpy(x)).detach().numpy()
    print(f"torch -> hl: largest difference {np.abs(a - b).max():.2e}")


if __name__ == "__main__":
    main()
