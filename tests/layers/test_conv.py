"""Conv1d, Conv2d, ConvTranspose1d/2d against torch.nn (weights copied across), shape
inference, and the errors a user meets."""
import numpy as np
import pytest

import hl
from hl.layers import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d

from .reference import build, compare

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-4  # float32 sums of up to a few hundred products
W_B = {"W": "weight", "b": "bias"}


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CONV2D = [  # keyword arguments, the same for hl and torch; in_channels 4, out_channels 6
    dict(kernel_size=3),
    dict(kernel_size=(3, 2), stride=2, padding=1),
    dict(kernel_size=3, padding="same"),
    dict(kernel_size=4, padding="same", dilation=2),
    dict(kernel_size=3, padding="valid", bias=False),
    dict(kernel_size=3, dilation=(2, 1), padding=(2, 1)),
    dict(kernel_size=3, groups=2, stride=(1, 2)),
]


@pytest.mark.parametrize("kw", CONV2D)
def test_conv2d_matches_torch(kw):
    torch.manual_seed(0)
    tmod = torch.nn.Conv2d(4, 6, **kw)
    layer = Conv2d(6, **kw)
    mapping = W_B if tmod.bias is not None else {"W": "weight"}
    y = compare(layer, tmod, _x(2, 4, 9, 8), mapping, RTOL, ATOL)
    assert layer.in_channels == 4 and layer.W.shape == tuple(tmod.weight.shape)
    assert ("b" in layer.get_params()) == (tmod.bias is not None)
    assert y.shape == (2, 6) + y.shape[2:]


def test_conv2d_same_padding_with_stride():
    # torch refuses padding='same' with stride > 1; hl pads like ONNX SAME_UPPER (the extra
    # row/column at the end): the output is ceil(input / stride).
    layer = Conv2d(3, 4, stride=2, padding="same")
    x = _x(1, 2, 9, 10)
    y = build(layer, x)
    assert y.shape == (1, 3, 5, 5)
    tmod = torch.nn.Conv2d(2, 3, 4, stride=2)
    with torch.no_grad():
        tmod.weight.copy_(torch.tensor(layer.W.numpy()))
        tmod.bias.copy_(torch.tensor(layer.b.numpy()))
        # total pad: rows (5-1)*2+4-9 = 3 -> (1, 2); columns (5-1)*2+4-10 = 2 -> (1, 1)
        want = tmod(torch.nn.functional.pad(torch.tensor(x), (1, 1, 1, 2))).numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=RTOL, atol=ATOL)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's note
@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=5, stride=2, padding=2),
                                dict(kernel_size=3, dilation=2, groups=3, bias=False),
                                dict(kernel_size=4, padding="same")])
def test_conv1d_matches_torch(kw):
    torch.manual_seed(1)
    tmod = torch.nn.Conv1d(3, 6, **kw)
    layer = Conv1d(6, **kw)
    mapping = W_B if tmod.bias is not None else {"W": "weight"}
    compare(layer, tmod, _x(2, 3, 17), mapping, RTOL, ATOL)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1,
                                                          output_padding=1),
                                dict(kernel_size=(2, 3), stride=(2, 1), groups=2, bias=False),
                                dict(kernel_size=3, dilation=2, stride=2)])
def test_conv_transpose2d_matches_torch(kw):
    torch.manual_seed(2)
    tmod = torch.nn.ConvTranspose2d(4, 6, **kw)
    layer = ConvTranspose2d(6, **kw)
    mapping = W_B if tmod.bias is not None else {"W": "weight"}
    compare(layer, tmod, _x(2, 4, 5, 6), mapping, RTOL, ATOL)
    assert layer.W.shape == tuple(tmod.weight.shape)  # (in, out / groups, kh, kw)


def test_conv_transpose1d_matches_torch():
    torch.manual_seed(3)
    tmod = torch.nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1)
    layer = ConvTranspose1d(2, 3, stride=2, padding=1, output_padding=1)
    compare(layer, tmod, _x(2, 3, 7), W_B, RTOL, ATOL)


def test_pytorch_argument_order_and_checked_in_channels():
    layer = Conv2d(3, 8, 5)  # (in_channels, out_channels, kernel_size)
    assert (layer.in_channels, layer.out_channels, layer.kernel_size) == (3, 8, (5, 5))
    with pytest.raises(hl.errors.ShapeError, match=r"expected input with 3 channels"):
        build(layer, _x(1, 4, 8, 8))
    assert not layer.built
    assert Conv2d(8, 5, in_channels=3).in_channels == 3


def test_parameters_created_on_first_call_with_default_init():
    layer = Conv2d(20, 5)
    assert layer.get_params() == {}
    build(layer, _x(2, 1, 28, 28))
    p = layer.get_params()
    assert p["W"].shape == (20, 1, 5, 5) and p["b"].shape == (20,)
    assert np.all(p["b"].numpy() == 0)
    limit = np.sqrt(6.0 / (25 + 500))  # glorot_uniform: fan_in 25, fan_out 500
    assert 0 < np.abs(p["W"].numpy()).max() <= limit


def test_channels_last_input_names_the_fix():
    class Block(hl.layers.Layer):
        def __init__(self):
            super().__init__()
            self.conv1 = Conv2d(8, 3)

        def forward(self, x):
            return self.conv1(x)

    class Net(hl.layers.Layer):
        def __init__(self):
            super().__init__()
            self.blk1 = Block()

        def forward(self, x):
            return self.blk1(x)

    net = Net()
    build(net, _x(2, 3, 28, 28))
    msg = ("Conv2d 'blk1.conv1': expected input with 3 channels (NCHW), received shape "
           "(8, 28, 28, 3); did you mean channels-last? Transpose with x.permute(0, 3, 1, 2).")
    with pytest.raises(hl.errors.ShapeError) as e:
        net(hl.tensor(_x(8, 28, 28, 3)))
    assert str(e.value) == msg


@pytest.mark.parametrize("make,shape,match", [
    (lambda: Conv2d(4, 3), (3, 8, 8), r"expected a 4-D input \(N, C, H, W\), received shape "
                                      r"\(3, 8, 8\); for a single sample add the batch axis"),
    (lambda: Conv1d(4, 3), (2, 3, 8, 8), r"Conv1d: expected a 3-D input \(N, C, L\)"),
    (lambda: Conv2d(4, 5), (1, 3, 4, 8), r"spatial size \(4, 8\).*smaller than the kernel "
                                         r"\(5, 5\)"),
    (lambda: Conv2d(4, 3, dilation=3), (1, 3, 6, 8), r"smaller than the dilated kernel \(7, 7\)"),
    (lambda: Conv2d(4, 3, groups=2), (1, 3, 8, 8), r"3 channels .* not divisible by groups=2"),
])
def test_bad_inputs(make, shape, match):
    with pytest.raises(hl.errors.ShapeError, match=match):
        build(make(), _x(*shape))


@pytest.mark.parametrize("make,match", [
    (lambda: Conv2d(6, 3, groups=4), r"out_channels \(6\) must be divisible by groups \(4\)"),
    (lambda: Conv2d(6, 0), r"kernel_size must be positive"),
    (lambda: Conv2d(6, 3, stride=(1, 0)), r"stride must be positive"),
    (lambda: Conv2d(6, 3, padding="full"), r"padding must be an int, a tuple, 'same' or "
                                           r"'valid', got 'full'"),
    (lambda: Conv2d(6, 3, padding=-1), r"padding must be non-negative"),
    (lambda: Conv2d(6, (3, 3, 3)), r"kernel_size must be an int or 2 ints"),
    (lambda: ConvTranspose2d(6, 3, padding="same"), r"padding must be numbers"),
    (lambda: ConvTranspose2d(6, 3, stride=2, output_padding=2), r"output_padding .* smaller"),
])
def test_bad_arguments(make, match):
    with pytest.raises(hl.errors.ValueError, match=match):
        make()


def test_placeholder_infers_output_shape_without_computing():
    layer = Conv2d(5, 3, stride=2, padding=1)
    y = layer(hl.Placeholder((4, 3, 11, 12)))
    assert isinstance(y, hl.Placeholder) and y.shape == (4, 5, 6, 6)
    assert layer.W.shape == (5, 3, 3, 3)
    t = ConvTranspose2d(2, 3, stride=2)(hl.Placeholder((4, 3, 5, 5)))
    assert t.shape == (4, 2, 11, 11)
