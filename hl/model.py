"""hl.Module: a model (SINGA's Model API): a Layer with compile, train_one_batch, and (with the
training issue) fit / evaluate / predict; save_states / load_states write checkpoints
(hl/checkpoint).

    class CNN(hl.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = hl.layers.Conv2d(20, 5)
            ...
            self.loss_fn = hl.losses.SoftmaxCrossEntropy()
            self.optim = hl.opt.SGD(lr=0.05, momentum=0.9)

        def forward(self, x):
            return ...

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss_fn(out, y)
            self.optim.backward_and_update(loss)
            return out, loss

    model = CNN()
    model.compile([hl.Placeholder((64, 1, 28, 28))], is_train=True)   # every parameter exists
"""
from . import errors
from .autograd import Placeholder, no_grad
from .layers.layer import Layer


class Module(Layer):
    """Subclass it, build layers in __init__, write forward (and optionally
    train_one_batch)."""

    def __init__(self, name=None):
        super().__init__(name)
        self.__dict__["_compiled"] = False

    def compile(self, inputs, is_train=True, use_graph=False, graph_alg="sequence",
                sequential=None):
        """Creates every parameter by running forward once on `inputs`: hl.Placeholder
        objects (shapes only: nothing is computed or allocated but the parameters) or real
        tensors. ``sequential`` is SINGA's released spelling of ``graph_alg``."""
        if sequential is not None:
            graph_alg = "sequence" if sequential else "topological"
        if graph_alg not in ("sequence", "topological"):
            raise errors.ValueError(f"compile: graph_alg must be 'sequence' or 'topological', "
                                    f"got {graph_alg!r}")
        if use_graph:
            raise errors.UnsupportedError(
                "compile(use_graph=True): graph mode is not yet supported (it comes with its "
                "own issue); compile with use_graph=False to run eagerly")
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        for i, x in enumerate(inputs):
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise errors.ValueError(f"compile: input {i} is a {type(x).__name__}; pass "
                                        f"hl.Placeholder(shape, dtype) or tensors")
        self.train(is_train)
        with no_grad():
            self(*inputs)
        self.__dict__["_compiled"] = True
        self.__dict__["graph_mode"] = False
        return self

    def graph(self, mode=True, sequential=True):
        """SINGA's switch for graph mode: not yet supported, so mode=True raises."""
        if mode:
            raise errors.UnsupportedError("graph mode is not yet supported; run eagerly "
                                          "(graph(False))")

    def train_one_batch(self, x, y):
        """One step: forward, loss (self.loss_fn), backward and update (self.optim).
        Override it for anything else; return (output, loss)."""
        loss_fn = self.__dict__.get("loss_fn")
        optim = self.__dict__.get("optim")
        if loss_fn is None or optim is None:
            raise errors.ValueError(
                f"{type(self).__name__}.train_one_batch: set self.loss_fn and self.optim "
                f"(e.g. hl.losses.SoftmaxCrossEntropy() and hl.opt.SGD(lr=0.1)) or override "
                f"train_one_batch")
        out = self(x)
        loss = loss_fn(out, y)
        optim.backward_and_update(loss)
        return out, loss

    # ---- checkpoints ------------------------------------------------------------------

    def save_states(self, fpath, aux_states=None, format="hl", overwrite=True):
        """Writes every state (parameters and buffers) and ``aux_states`` (epoch, learning
        rate, an optimiser, tensors, arrays, dicts and lists of these) to one zip file,
        atomically. ``format="singa"`` writes SINGA's own checkpoint layout.
        ``overwrite=False`` refuses an existing file, as SINGA does."""
        from .checkpoint import singa, states
        if format == "hl":
            states.save(self, fpath, aux_states, overwrite)
        elif format == "singa":
            singa.save(self, fpath, aux_states, overwrite)
        else:
            raise errors.ValueError(f"save_states: format must be 'hl' or 'singa', got "
                                    f"{format!r}")

    def load_states(self, fpath, strict=True):
        """Restores the states saved by save_states (either format, recognised from the file)
        onto this module's device, and returns the auxiliary values as a dict; an optimiser
        comes back as its states (``optim.set_states(aux["optim"])``). Missing, unexpected or
        mis-shaped names raise hl.errors.CheckpointError listing them and load nothing;
        ``strict=False`` loads what matches and warns about the rest."""
        from .checkpoint import states
        return states.load(self, fpath, strict)


Model = Module  # SINGA's name: class MyModel(model.Model)

__all__ = ["Model", "Module", "Placeholder"]
