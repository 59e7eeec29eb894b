"""PyTorch's module API on hl models, with PyTorch itself as the reference: state_dict's
order and contents, load_state_dict's missing / unexpected keys and strictness, the module
walks, and a PyTorch-style training loop that follows torch's trajectory."""
import numpy as np
import pytest

import hl
from hl import layers as L

torch = pytest.importorskip("torch")

# hl's tensor names -> torch's, for the same architecture
_NAMES = {"W": "weight", "b": "bias", "scale": "weight", "bias": "bias",
          "running_mean": "running_mean", "running_var": "running_var"}


def _torch_name(key):
    head, _, leaf = key.rpartition(".")
    return f"{head}.{_NAMES[leaf]}" if head else _NAMES[leaf]


def _pair():
    class Block(hl.Module):
        def __init__(self):
            super().__init__()
            self.conv = L.Conv2d(4, 3, padding=1)
            self.bn = L.BatchNorm2d()

        def forward(self, x):
            return self.bn(self.conv(x)).relu()

    class TBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    h = hl.Sequential(Block(), L.Flatten(), hl.layers.Sequential(L.Linear(5), L.ReLU()),
                      L.Linear(3))
    h(hl.zeros(2, 2, 4, 4))
    t = torch.nn.Sequential(TBlock(), torch.nn.Flatten(),
                            torch.nn.Sequential(torch.nn.Linear(64, 5), torch.nn.ReLU()),
                            torch.nn.Linear(5, 3))
    return h, t


def test_state_dict_order_and_names_follow_torch():
    h, t = _pair()
    sd = h.state_dict()
    assert type(sd).__name__ == "OrderedDict"
    want = [k for k in t.state_dict() if not k.endswith("num_batches_tracked")]
    assert [_torch_name(k) for k in sd] == want
    assert [_torch_name(k) for k, _ in h.named_parameters()] == \
        [k for k, _ in t.named_parameters()]
    assert [_torch_name(k) for k, _ in h.named_buffers()] == \
        [k for k, _ in t.named_buffers() if not k.endswith("num_batches_tracked")]
    assert [n for n, _ in h.named_modules()] == [n for n, _ in t.named_modules()]
    assert [type(m).__name__ for m in h.children()] == \
        ["Block"] + [type(m).__name__ for m in t.children()][1:]
    assert len(list(h.modules())) == len(list(t.modules()))
    assert len(h.parameters()) == len(list(t.parameters()))


def test_state_dict_shares_memory_and_keep_vars():
    h, _ = _pair()
    sd = h.state_dict()
    w = h.get_layer("3").W
    assert sd["3.W"] is not w and not sd["3.W"].requires_grad
    with hl.no_grad():
        w += 1.0
    np.testing.assert_array_equal(sd["3.W"].numpy(), w.numpy())  # a view, as in torch
    assert h.state_dict(keep_vars=True)["3.W"] is w
    assert list(h.state_dict(prefix="m."))[0] == "m.0.conv.W"


def _report(result):
    return sorted(result.missing_keys), sorted(result.unexpected_keys)


def test_load_state_dict_reports_keys_as_torch_does():
    h, t = _pair()
    hsd = {k: v.numpy().copy() for k, v in h.state_dict().items()}
    tsd = dict(t.state_dict())
    hsd.pop("3.b"), tsd.pop("3.bias")
    hsd["extra.W"], tsd["extra.weight"] = np.zeros(2, np.float32), torch.zeros(2)
    tr = t.load_state_dict(tsd, strict=False)
    hr = h.load_state_dict(hsd, strict=False)
    assert [[_torch_name(k) for k in part] for part in _report(hr)] == \
        [sorted(p) for p in _report(tr)]
    with pytest.raises(RuntimeError, match="Missing key"):
        t.load_state_dict(tsd)
    with pytest.raises(hl.errors.ValueError, match=r'(?s)Error\(s\) in loading state_dict for '
                                                   r'Sequential:.*Unexpected key\(s\) in '
                                                   r'state_dict: "extra.W".*Missing key\(s\) in '
                                                   r'state_dict: "3.b"'):
        h.load_state_dict(hsd)


def test_load_state_dict_refuses_a_size_mismatch_even_when_not_strict():
    h, t = _pair()
    tsd = dict(t.state_dict())
    tsd["3.weight"] = torch.zeros(3, 6)
    with pytest.raises(RuntimeError, match="size mismatch"):
        t.load_state_dict(tsd, strict=False)
    before = h.state_dict()["0.conv.W"].numpy().copy()
    hsd = {k: np.ones(v.shape, np.float32) for k, v in h.state_dict().items()}
    hsd["3.W"] = np.zeros((6, 3), np.float32)
    with pytest.raises(hl.errors.ValueError, match=r"size mismatch for 3.W: copying a value "
                                                   r"with shape \(6, 3\) from the state dict, "
                                                   r"the shape in the current model is \(5, 3\)"):
        h.load_state_dict(hsd, strict=False)
    np.testing.assert_array_equal(h.state_dict()["0.conv.W"].numpy(), before)  # nothing copied


def test_load_state_dict_round_trip_and_unbuilt_model():
    h, _ = _pair()
    other, _ = _pair()
    r = other.load_state_dict(h.state_dict())
    assert r.missing_keys == [] and r.unexpected_keys == []
    x = hl.randn(2, 2, 4, 4)
    np.testing.assert_array_equal(other.eval()(x).numpy(), h.eval()(x).numpy())
    with pytest.raises(hl.errors.ValueError, match="has no parameters yet"):
        hl.Sequential(L.Linear(3)).load_state_dict({"0.W": np.zeros((2, 3))})


def test_modes_and_devices_return_the_module():
    h, _ = _pair()
    w = h.get_layer("3").W
    assert h.train() is h and h.eval() is h and h.to("cpu") is h and h.cpu() is h
    assert h.get_layer("3").W is w  # the same tensor objects, as torch's .to keeps them
    with pytest.raises(hl.errors.UnsupportedError, match="only a device"):
        h.to(hl.float64)
    if hl.cuda_available():
        assert h.cuda() is h and w.device.kind == "cuda"
        h.cpu()
        assert w.device.kind == "cpu"


def test_pytorch_style_loop_follows_torch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 5)).astype(np.float32)
    y = rng.normal(size=(16, 2)).astype(np.float32)
    h = hl.Sequential(L.Linear(5, 8), L.Tanh(), L.Linear(8, 2))
    h(hl.tensor(x))
    t = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    with torch.no_grad():
        for k, v in h.state_dict().items():
            tv = t.state_dict()[_torch_name(k)]
            tv.copy_(torch.tensor(v.numpy().T if k.endswith("W") else v.numpy()))
    hopt = hl.opt.SGD(lr=0.1, momentum=0.9, params=h.parameters())
    topt = torch.optim.SGD(t.parameters(), lr=0.1, momentum=0.9)
    h.train(), t.train()
    for _ in range(10):
        loss = ((h(hl.tensor(x)) - hl.tensor(y)) ** 2).mean()
        loss.backward()
        hopt.step()
        hopt.zero_grad()
        tloss = ((t(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        tloss.backward()
        topt.step()
        topt.zero_grad()
        np.testing.assert_allclose(float(loss.item()), float(tloss.item()), rtol=1e-5)
    np.testing.assert_allclose(h.state_dict()["2.W"].numpy(),
                               t.state_dict()["2.weight"].numpy().T, rtol=1e-4, atol=1e-6)


def test_zero_grad_on_the_module():
    m = hl.Sequential(L.Linear(3))
    m(hl.ones(2, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
