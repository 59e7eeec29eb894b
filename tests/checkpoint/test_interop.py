"""Weights between hl and PyTorch (examples/torch_interop.py) and through numpy.savez."""
import importlib.util
import os

import numpy as np
import pytest

import hl

from .models import built, same_states, snapshot

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_interop.py")


def load_example():
    spec = importlib.util.spec_from_file_location("torch_interop", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_get_states_round_trips_through_numpy_savez(tmp_path):
    a = built()
    a.train_one_batch(hl.randn(4, 1, 5, 5), hl.tensor([0, 1, 2, 1]))
    np.savez(tmp_path / "w.npz", **{k: v.numpy() for k, v in a.get_states().items()})
    b = built()
    b.set_states(dict(np.load(tmp_path / "w.npz")))
    assert same_states(b, snapshot(a))


def test_weights_move_both_ways_between_hl_and_pytorch():
    torch = pytest.importorskip("torch")
    ex = load_example()
    ours, theirs = ex.models()
    x = np.random.default_rng(1).standard_normal((5, 1, 8, 8)).astype(np.float32)
    ours.eval(), theirs.eval()
    theirs.load_state_dict(ex.to_torch(ours))
    np.testing.assert_allclose(theirs(torch.from_numpy(x)).detach().numpy(),
                               ours(hl.tensor(x)).numpy(), rtol=1e-4, atol=1e-5)
    theirs = ex.models()[1]
    with torch.no_grad():  # non-trivial statistics, so a swapped mean/var would show
        theirs[1].running_mean.uniform_(-1, 1)
        theirs[1].running_var.uniform_(0.5, 2)
    theirs.eval()
    ex.from_torch(ours, theirs.state_dict())
    np.testing.assert_allclose(ours(hl.tensor(x)).numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)
