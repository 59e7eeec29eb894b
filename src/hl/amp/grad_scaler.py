"""GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics.

float16 has 5 exponent bits: gradients below 2^-24 flush to zero. Multiplying the loss by a
large scale S moves the whole backward pass up by S; the gradients are divided by S again
(``unscale_``) before the update. When a gradient is inf or NaN the scale was too large: the
update is skipped and S shrinks (``backoff_factor``); after ``growth_interval`` updates in a
row without one, S grows (``growth_factor``) to keep small gradients representable.

PyTorch style (the optimiser was given ``params``)::

    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()

SINGA style (the optimiser updates as gradients arrive)::

    scaler.backward_and_update(opt, loss)   # backward, unscale, step unless inf/NaN, update

The check for inf/NaN is one sum per gradient of ``grad * 0`` (0 for finite values, NaN
otherwise), all added on the device and read once: one synchronisation per step.

While a plan is recorded (graph mode) the same steps are recorded with the scale, the growth
tracker and the found-inf flag as device tensors (hl/amp/recorded.py): the plan reads the
scale at each replay and skips the update on the device. Between recorded and eager steps
the host values and the tensors are kept one truth (read back before an eager step, written
after it).
"""
import math

from .. import _core, errors
from .._tensor import Tensor
from ..autograd import functional as F
from ..autograd.engine import backward as _backward
from ..autograd.mode import no_grad
from ..graph import recording
from .recorded import DeviceScaling, unscale_and_probe

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"
_ON_DEVICE = "on the device"  # found_inf of a recorded step: a tensor the plan writes


class GradScaler:
    _dev = None  # DeviceScaling, once a plan has recorded a step (not pickled)

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise errors.ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise errors.ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                                    f"{backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise errors.ValueError(f"GradScaler: growth_interval must be a positive integer, "
                                    f"got {growth_interval}")
        if not (init_scale > 0 and math.isfinite(init_scale)):
            raise errors.ValueError(f"GradScaler: init_scale must be a positive finite number, "
                                    f"got {init_scale}")
        self.device = str(device)
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"} since update()

    # ---- the PyTorch-style steps ----------------------------------------------------------

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) multiplied by the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if _core.recording():
                return self._device(outputs.device).scaled(outputs)
            self._pull()
            return F.mul(outputs, self._scale)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise errors.ValueError(f"GradScaler.scale: expected a Tensor or a list/tuple of them, "
                                f"got {type(outputs).__name__}")

    def unscale_(self, optimizer):
        """Divides the gradients (``.grad``) of optimizer's parameters by the scale, in place,
        and records whether one is inf or NaN. At most once per optimizer between updates."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] is _UNSCALED:
            raise errors.ValueError("GradScaler.unscale_() has already been called on this "
                                    "optimizer since the last update()")
        if st["stage"] is _STEPPED:
            raise errors.ValueError("GradScaler.unscale_() is being called after step()")
        average = getattr(optimizer, "average_gradients", None)
        if average is not None:  # DistOpt: every rank must see the same inf, so average first
            average()
        grads = [p.grad for p in optimizer._known_params() if p.grad is not None]
        if _core.recording():
            first = not any(s["found_inf"] is not None for s in self._per_optimizer.values())
            dev = self._device(grads[0].device if grads else None)
            dev.settle_after_runs(optimizer)
            dev.unscale(grads, first)
            st["found_inf"] = _ON_DEVICE
        else:
            st["found_inf"] = self._unscale(grads)
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless a gradient was inf or NaN (unscales first if unscale_ was
        not called); returns what step returned, or None when it was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        st = self._state(optimizer)
        if st["stage"] is _STEPPED:
            raise errors.ValueError("GradScaler.step() has already been called since the last "
                                    "update()")
        if st["stage"] is _READY:
            self.unscale_(optimizer)
        st["stage"] = _STEPPED
        if st["found_inf"] is _ON_DEVICE:  # recorded: the device skips the update
            out = []
            self._dev.guarded(optimizer, [p for p in optimizer._known_params()
                                          if p.grad is not None],
                              lambda: out.append(optimizer.step(*args, **kwargs)))
            return out[0]
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Sets the scale for the next iteration: new_scale when given; otherwise backoff when
        any optimizer stepped this iteration saw inf/NaN, growth after growth_interval clean
        iterations in a row."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
            if not (value > 0 and math.isfinite(value)):
                raise errors.ValueError(f"GradScaler.update: new_scale must be a positive "
                                        f"finite number, got {value}")
            self._pull()
            self._scale = value
            self._push()
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values()
                     if s["found_inf"] is not None]
            if not found:
                raise errors.ValueError("GradScaler.update: no inf checks were recorded prior "
                                        "to update() (call step() or unscale_() first)")
            if _ON_DEVICE in found:
                self._dev.update_scale()
            else:
                self._pull()
                self._apply(any(found))
                self._push()
        self._per_optimizer = {}

    # ---- SINGA style ----------------------------------------------------------------------

    def backward_and_update(self, optimizer, loss, dy=None):
        """optimizer.backward_and_update(loss) with the loss scaled: backward from loss * scale,
        every gradient unscaled, the update applied to all of them unless one is inf or NaN,
        then update(). Returns True when the update was applied."""
        if not self._enabled:
            optimizer.backward_and_update(loss, dy)
            return True
        if _core.recording():
            return self._recorded_backward_and_update(optimizer, loss, dy)
        self._pull()
        scaled = F.mul(loss, self._scale)
        pairs = list(_backward(scaled, None if dy is None else F.mul(dy, self._scale)))
        average = getattr(optimizer, "average_gradients", None)
        if average is not None:  # DistOpt: every rank must see the same inf, so average first
            pairs = average(pairs)
        found_inf = self._unscale([g for _, g in pairs])
        if not found_inf:
            optimizer._update_all(pairs)
            optimizer._count_step()
        self._apply(found_inf)
        self._push()
        self._per_optimizer = {}
        return not found_inf

    def _recorded_backward_and_update(self, optimizer, loss, dy):
        """backward_and_update in a plan being recorded: every decision on the device.
        Returns None (whether the update applies is known only when the plan runs)."""
        if getattr(optimizer, "world_size", 1) > 1:
            raise errors.UnsupportedError(
                "GradScaler.backward_and_update: a DistOpt over several ranks in graph mode is "
                "not built (the gradients would not be averaged before the inf check); "
                "compile with use_graph=False, or use DistOpt.backward_and_update_half")
        dev = self._device(loss.device)
        dev.settle_after_runs(optimizer)
        pairs = list(_backward(dev.scaled(loss), None if dy is None else dev.scaled(dy)))
        dev.unscale([g for _, g in pairs], first=True)

        def update():
            optimizer._update_all(pairs)
            optimizer._count_step()
        dev.guarded(optimizer, [p for p, _ in pairs], update)
        dev.update_scale()
        self._per_optimizer = {}
        return None

    # ---- state ----------------------------------------------------------------------------

    def get_scale(self):
        self._pull()
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, value):
        self._pull()
        self._growth_factor = float(value)
        self._push()

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, value):
        self._pull()
        self._backoff_factor = float(value)
        self._push()

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, value):
        self._pull()
        self._growth_interval = int(value)
        self._push()

    def state_dict(self):
        if not self._enabled:
            return {}
        self._pull()
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state):
        if not self._enabled:
            return
        if not state:
            raise errors.ValueError("GradScaler.load_state_dict: the state is empty (saved from "
                                    "a disabled scaler?)")
        self._scale = float(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])
        self._push()

    def __repr__(self):
        return (f"GradScaler(scale={self._scale}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, growth_interval="
                f"{self._growth_interval}, enabled={self._enabled})")

    # ---- inside ---------------------------------------------------------------------------

    def __getstate__(self):  # the device tensors are derived: the host values travel
        self._pull()
        state = self.__dict__.copy()
        state.pop("_dev", None)  # a loaded scaler reads the class's None
        return state

    def _device(self, device):
        """The DeviceScaling on device (made from the host values on first use), while a
        plan records; an abandoned recording puts the per-optimizer stages back."""
        stages = {k: dict(v) for k, v in self._per_optimizer.items()}
        recording.on_abort_once(self, lambda: setattr(self, "_per_optimizer", stages))
        if self._dev is None or self._dev.device != device:
            self._pull()
            self._dev = DeviceScaling(device, self)
        return self._dev

    def _pull(self):
        """Host values from the device tensors (what replays left there), outside a
        recording."""
        if self._dev is not None and not _core.recording():
            self._dev.pull(self)

    def _push(self):
        if self._dev is not None and not _core.recording():
            self._dev.push(self)

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _READY, "found_inf": None})

    def _unscale(self, grads):
        """grads *= 1/scale in place; True when one of them holds inf or NaN."""
        if not grads:
            return False
        with no_grad():
            probe = unscale_and_probe(grads, 1.0 / self._scale)
            return not math.isfinite(float(probe.item()))

    def _apply(self, found_inf):
        """torch's _amp_update_scale_: backoff on inf/NaN, growth after an interval."""
        if found_inf:
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
            return
        successful = self._growth_tracker + 1
        if successful == self._growth_interval:
            grown = self._scale * self._growth_factor
            if math.isfinite(grown):
                self._scale = grown
            self._growth_tracker = 0
        else:
            self._growth_tracker = successful
