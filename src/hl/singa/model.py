"""SINGA's model module: ``Model`` is hl.Module under SINGA's interface.

    class MyModel(model.Model):
        def __init__(self):
            super().__init__()
            self.conv1 = layer.Conv2d(1, 20, 5, activation="RELU")
            ...
        def forward(self, x): ...
        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.softmax_cross_entropy(out, y)
            self.optimizer(loss)
            return out, loss

    m.compile([tx], is_train=True, use_graph=False, sequential=False)
    out, loss = m(tx, ty)        # training mode: one train_one_batch step
    m.eval(); out = m(tx)        # evaluation mode: forward

**float16** (SINGA's ``train_cnn.py -p float16``: float16 input tensors): hl runs compile,
train_one_batch and forward under ``hl.amp.autocast("cuda", dtype=float16)``, so the
parameters stay float32 (SINGA's would be float16), matmul and convolution compute in
float16, the loss and the norms in float32 (docs/amp.md). On the CPU, which has no float16
arithmetic in hl (nor in SINGA), a float16 input raises UnsupportedError.

``save_states`` writes SINGA's checkpoint zip by default (``format="hl"`` for hl's);
``load_states`` reads either. Graph mode (``use_graph=True``, ``graph(True)``) runs
train_one_batch as a recorded plan (hl.Module.graph; docs/training.md).
"""
import contextlib

from .. import dtypes as _dt
from .. import errors
from .. import model as _model
from ..amp import autocast
from . import autograd as _autograd
from . import layer as _layer
from .tensor import _py


class Model(_layer.Layer, _model.Module):
    """SINGA's Model: a Layer with compile, train_one_batch, train/eval, graph and
    save_states/load_states."""

    def __init__(self):
        _model.Module.__init__(self)
        d = self.__dict__
        d["graph_mode"] = False
        d["sequential"] = False

    def compile(self, inputs, is_train=True, use_graph=False, sequential=False):
        """Creates every parameter by running forward once on `inputs` (tensors or
        placeholders), and sets training or evaluation mode."""
        with _float16_region(inputs):
            _model.Module.compile(self, list(inputs), is_train=is_train, use_graph=use_graph,
                                  sequential=sequential)
        self.train(is_train)
        self.graph(use_graph, sequential)
        return self

    def train(self, mode=True):
        """Training (or, mode=False, evaluation) mode for the model and SINGA's global flag."""
        _model.Module.train(self, mode)
        _autograd.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def graph(self, mode=True, sequential=False):
        return _model.Module.graph(self, mode, sequential)

    def __call__(self, *xs, **kwargs):
        """In training mode one ``train_one_batch`` step, in evaluation mode ``forward``."""
        with _float16_region(xs):
            if self.training:
                if not self._built:
                    self.__dict__["_built"] = True
                    self._link_children()
                return _py(self.train_one_batch(*xs, **kwargs))
            return _layer.Layer.__call__(self, *xs, **kwargs)

    def train_one_batch(self, *xs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no train_one_batch()")

    def save_states(self, fpath, aux_states=None, format="singa", overwrite=False):
        """SINGA's checkpoint zip (tensor_dict.npz + states_attr.json) by default; an
        existing file is refused unless overwrite=True, as SINGA refuses it."""
        _model.Module.save_states(self, fpath, aux_states or {}, format=format,
                                  overwrite=overwrite)

    def load_states(self, fpath, strict=True):
        """Restores the states (SINGA's or hl's format) and returns the auxiliary ones."""
        aux = _model.Module.load_states(self, fpath, strict)
        return {k: _py(v) for k, v in aux.items()}


__all__ = ["Model"]


def _float16_region(xs):
    """SINGA's float16 path as hl's mixed precision: an autocast region when an input is a
    float16 tensor on cuda (module docstring)."""
    for x in xs:
        if getattr(x, "dtype", None) is _dt.float16:
            kind = getattr(x, "_target", None) or x.device
            if kind.kind != "cuda":
                raise errors.UnsupportedError(
                    f"SINGA's float16 training (a float16 input on {kind}) needs a cuda device: "
                    f"hl's CPU kernels have no float16 arithmetic; use float32 on the CPU")
            return autocast("cuda", dtype=_dt.float16)
    return contextlib.nullcontext()
