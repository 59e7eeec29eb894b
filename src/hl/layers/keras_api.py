"""Keras's layer API on every hl Layer: ``trainable``, ``weights`` / ``trainable_weights`` /
``non_trainable_weights``, ``count_params()``, ``get_weights()`` / ``set_weights()``.

Keras's notion of a weight is hl's state: parameters and buffers (a batch norm's running
statistics are Keras's non-trainable moving mean and variance), in creation order, the
layer's own first and then its sub-layers', each tensor once.
"""
import numpy as np

from .. import errors
from .._tensor import Tensor
from ..autograd import no_grad


class KerasLayerAPI:
    """Mixed into Layer (hl/layers/layer.py), which provides get_states, named_layers and the
    per-layer lists these read."""

    # ---- trainable --------------------------------------------------------------------

    @property
    def trainable(self):
        """False freezes every parameter of this layer and the layers under it: fit and the
        optimisers leave them alone, summary counts them as non-trainable, and a batch norm
        normalises with its running statistics (Keras's rule). True gives back trainability
        to every parameter created trainable."""
        return self.__dict__.get("_trainable", True)

    @trainable.setter
    def trainable(self, value):
        flag = bool(value)
        for _, layer in self.named_layers():
            layer.__dict__["_trainable"] = flag
            fixed = layer.__dict__.get("_fixed", ())
            for local in layer._param_names:
                t = layer.__dict__[local]
                t.requires_grad = t.stores_grad = flag and local not in fixed

    # ---- weights ----------------------------------------------------------------------

    @property
    def weights(self):
        """Every parameter and buffer tensor (the tensors themselves), in creation order."""
        return list(self.get_states().values())

    @property
    def trainable_weights(self):
        return [t for t in self.get_states().values() if t.requires_grad]

    @property
    def non_trainable_weights(self):
        return [t for t in self.get_states().values() if not t.requires_grad]

    def count_params(self):
        """The number of values in this layer's weights (trainable or not), as Keras counts."""
        self._require_built("count_params")
        return sum(int(t.size) for t in self.get_states().values())

    def get_weights(self):
        """The weights as a list of numpy arrays (copies), in the order of ``weights``."""
        return [np.array(t.numpy(), copy=True) for t in self.get_states().values()]

    def set_weights(self, weights):
        """Copies a list of arrays (as get_weights returns) into the weights, in place. The
        number of arrays and each shape are checked before anything is copied."""
        self._require_built("set_weights")
        targets = list(self.get_states().items())
        weights = list(weights)
        if len(weights) != len(targets):
            listing = ", ".join(f"{k} {tuple(t.shape)}" for k, t in targets)
            raise errors.ValueError(
                f"set_weights on {self.describe()}: expected a list of {len(targets)} arrays "
                f"({listing}), received {len(weights)}")
        wrong = []
        for i, ((key, t), w) in enumerate(zip(targets, weights)):
            shape = tuple(w.shape) if hasattr(w, "shape") else np.shape(w)
            if shape != tuple(t.shape):
                wrong.append(f"weight {i} ({key}): expected shape {tuple(t.shape)}, "
                             f"received {shape}")
        if wrong:
            raise errors.ShapeError(f"set_weights on {self.describe()}: " + "; ".join(wrong) +
                                    "; nothing was copied")
        with no_grad():
            for (_, t), w in zip(targets, weights):
                t.copy_(w if isinstance(w, Tensor) else np.asarray(w))

    def _require_built(self, op):
        unbuilt = self._unbuilt_layers()
        if unbuilt:
            raise errors.ValueError(
                f"{op} on {self.describe()}: the layers {unbuilt} have not been built yet "
                f"(a layer creates its weights on its first call). Call the model once on an "
                f"input, or compile it with hl.Placeholder inputs, first")


__all__ = ["KerasLayerAPI"]
