"""PyTorch's module API on every hl Layer: ``state_dict()`` / ``load_state_dict()``,
``named_parameters()``, ``named_buffers()``, ``named_modules()``, ``modules()``,
``children()`` / ``named_children()``, ``to(device)``, ``cpu()``, ``cuda()``,
``requires_grad_()``, ``zero_grad()``.

Names are hl's hierarchical names (``0.W``, ``blk1.conv1.b``); the order is PyTorch's: a
module's parameters, then its buffers, then each child's, recursively, every tensor once.
"""
import collections

import numpy as np

from .. import devices as _dev
from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..autograd import no_grad
from ..checkpoint.matching import compare

IncompatibleKeys = collections.namedtuple("IncompatibleKeys", "missing_keys unexpected_keys")


class TorchModuleAPI:
    """Mixed into Layer (hl/layers/layer.py), which provides get_params, get_states,
    named_children and the per-layer lists these read."""

    # ---- walking the tree -------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, layer) for this layer ('' at the top) and every layer under it."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            sub = f"{prefix}.{name}" if prefix else name
            yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, layer in self.named_modules():
            yield layer

    def children(self):
        """The direct sub-layers (named_children() gives their names too)."""
        for _, child in self.named_children():
            yield child

    # ---- tensors ----------------------------------------------------------------------

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) for every parameter, trainable or frozen."""
        yield from self._named_tensors(("_param_names",), prefix, recurse)

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, buffer): the states that are not parameters (running statistics...)."""
        yield from self._named_tensors(("_state_names",), prefix, recurse)

    def buffers(self, recurse=True):
        return [t for _, t in self.named_buffers(recurse=recurse)]

    def _named_tensors(self, kinds, prefix, recurse):
        if recurse:
            items = self._named(kinds).items()
        else:
            items = [(local, self.__dict__[local]) for kind in kinds
                     for local in getattr(self, kind)]
        for name, t in items:
            yield (f"{prefix}.{name}" if prefix else name), t

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered mapping name -> tensor of every parameter and buffer. The tensors share
        memory with the model (detached from autograd unless keep_vars), as PyTorch's do:
        copy them (``{k: v.numpy().copy() ...}``) to keep a snapshot."""
        out = collections.OrderedDict() if destination is None else destination
        for name, t in self.get_states().items():
            out[prefix + name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies a state dict's values (hl tensors or numpy arrays) into the parameters and
        buffers, in place. Returns ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        As PyTorch: with strict=True a missing or unexpected key raises, naming them all;
        a value whose shape differs raises whatever strict says. Nothing is copied when it
        raises. ``assign`` is accepted for PyTorch's signature; hl always copies, so
        optimisers and views holding the parameters stay valid."""
        targets = self.get_states()
        if not targets and state_dict and self._unbuilt_layers():
            raise errors.ValueError(
                f"load_state_dict on {self.describe()}: the model has no parameters yet "
                f"(layers create them on their first call); call it once on an input, or "
                f"compile it with hl.Placeholder inputs, before loading")
        missing, unexpected, wrong, ready = compare(targets, state_dict)
        problems = []
        if strict and unexpected:
            problems.append("Unexpected key(s) in state_dict: " +
                            ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            problems.append("Missing key(s) in state_dict: " +
                            ", ".join(f'"{k}"' for k in missing) + ".")
        for k, want, got in wrong:
            problems.append(f"size mismatch for {k}: copying a value with shape {got} from "
                            f"the state dict, the shape in the current model is {want}.")
        if problems:
            raise errors.ValueError(f"Error(s) in loading state_dict for "
                                    f"{self.describe()}:\n\t" + "\n\t".join(problems))
        with no_grad():
            for t, v in ready:
                t.copy_(v if isinstance(v, Tensor) else np.asarray(v))
        return IncompatibleKeys(missing, unexpected)

    # ---- devices and gradients --------------------------------------------------------

    def to(self, device=None, dtype=None):
        """Moves every parameter and buffer to `device`, in place (the tensor objects stay,
        so an optimiser holding them follows), and returns the layer. dtype is refused:
        hl layers keep the dtype they were built with."""
        if dtype is not None or isinstance(device, (_dt.DType, type)) or (
                isinstance(device, str) and device.split(":")[0] not in ("cpu", "cuda")):
            raise errors.UnsupportedError(f"{self.describe()}.to: only a device can be given "
                                          f"(cpu, cuda, cuda:N), got {device or dtype!r}")
        d = _dev.device(device)
        with no_grad():
            for t in self.get_states().values():
                if t.device != d:
                    t._move_to(d)
                    if t.grad is not None:
                        t.grad = t.grad.to(d)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    def requires_grad_(self, requires_grad=True):
        """PyTorch's spelling of ``trainable = requires_grad``; returns the layer."""
        self.trainable = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        """Clears ``.grad`` of every parameter (PyTorch's Module.zero_grad)."""
        for t in self.get_params().values():
            if set_to_none or t.grad is None:
                t.grad = None
            else:
                t.grad = ops.zeros_like(t.grad)


__all__ = ["IncompatibleKeys", "TorchModuleAPI"]
