"""GradScaler inside a recorded plan (graph mode): the loss scale, the growth tracker and the
found-inf flag are 0-d tensors on the loss's device, so a replay reads this step's scale and
decides on the device whether the step updates, with no host value baked into the plan.

Per recorded step (the same arithmetic as the eager scaler, so a replay gives its bits):
- the loss (and dy) is multiplied by the scale tensor, cast to the loss's dtype (eagerly the
  Python float is turned into a 0-d tensor of that dtype: the same number);
- each gradient is multiplied by 1/scale (computed in float64, rounded to the gradient's
  dtype, as eagerly), and ``found`` is set when the sum of every ``grad * 0`` is not finite;
- the optimiser's update skips where ``found`` is set: a parameter's one-pass update
  (hl.ops.optim_update, on the CPU and on cuda) reads the flag on the device and writes
  nothing; for the others (a rule's element-wise sequence: a non-contiguous parameter, a
  dtype without the kernel, hl.v2's composed rules) each parameter and optimiser state tensor
  the update writes is copied first and put back where ``found`` is set
  (``where(found, copy, updated)``); either way a skipped step leaves weights and state bit
  for bit unchanged;
- the scale and tracker follow torch's _amp_update_scale_ in float64 tensor arithmetic
  (backoff and reset on inf/NaN, growth when the tracker reaches the interval and the grown
  scale is finite): the eager rule's double arithmetic, on the device.
The host side of an update (the optimiser's step count and per-parameter counts, advanced by
the plan's replay hooks) is put back after a run whose ``found`` is set: ``after_run`` reads
the flag (one device read per step; fit reads the loss each step already).
"""
import numpy as np

from .. import _core, errors, ops
from .._tensor import Tensor, tensor
from ..autograd import functional as F
from ..autograd.binary import cast
from ..autograd.mode import no_grad
from ..graph import recording


def unscale_and_probe(grads, inv):
    """grads *= inv in place (inv: a Python float, or a 0-d float64 tensor cast to each
    gradient's dtype: the same number); returns the float32 sum of every ``grad * 0`` (0 when
    all are finite, NaN otherwise), or None when there are no gradients. The eager scaler and
    the recorded one share it."""
    probe = None
    for g in grads:
        F.mul(g, cast(inv, g.dtype) if isinstance(inv, Tensor) else inv, out=g)
        term = F.sum(F.mul(g, 0.0), dtype="float32")
        probe = term if probe is None else F.add(probe, term)
    return probe


class DeviceScaling:
    """The scaler's numbers as tensors on one device. ``scale`` and ``tracker`` are float64,
    ``found`` bool; ``growth``, ``backoff`` and ``interval`` (float64) are the configuration,
    so changing it does not leave a stale constant in a plan."""

    def __init__(self, device, scaler):
        def scalar(v, dt):
            return tensor(np.array(v, dt), device=device)
        self.device = device
        self.scale = scalar(scaler._scale, np.float64)
        self.tracker = scalar(float(scaler._growth_tracker), np.float64)
        self.found = scalar(False, np.bool_)
        self.growth = scalar(scaler._growth_factor, np.float64)
        self.backoff = scalar(scaler._backoff_factor, np.float64)
        self.interval = scalar(float(scaler._growth_interval), np.float64)
        self._writers = {n: _core.scalar_writer(getattr(self, n)._h, np.dtype(np.float64))
                         for n in ("scale", "tracker", "growth", "backoff", "interval")}

    def push(self, scaler):
        """Writes the scaler's host values (after an eager step or a load) into the tensors."""
        self._writers["scale"](scaler._scale)
        self._writers["tracker"](float(scaler._growth_tracker))
        self._writers["growth"](scaler._growth_factor)
        self._writers["backoff"](scaler._backoff_factor)
        self._writers["interval"](float(scaler._growth_interval))

    def pull(self, scaler):
        """Reads the device's scale and tracker into the scaler's host values."""
        scaler._scale = float(self.scale.item())
        scaler._growth_tracker = int(self.tracker.item())

    # ---- the recorded pieces ----------------------------------------------------------

    def scaled(self, t):
        return F.mul(t, cast(self.scale, t.dtype))

    def unscale(self, grads, first):
        """grads *= 1/scale in place; found = (this call's inf/NaN) or, unless ``first`` (the
        first unscale of the iteration), the flag of an earlier optimiser."""
        with no_grad():
            probe = unscale_and_probe(grads, F.true_divide(1.0, self.scale))
            if probe is None:
                if first:
                    self.found.fill_(False)
                return
            bad = F.logical_not(F.isfinite(probe))
            if first:
                self.found.copy_(bad)
            else:
                F.logical_or(self.found, bad, out=self.found)

    def guarded(self, optimizer, params, update):
        """update() with nothing written where found is set. A parameter the one-pass kernel
        updates reads the flag itself (ops.skipping_when; the CPU and cuda kernels); for the
        others every tensor the update writes (the parameter and its optimiser state) is
        copied first and put back where the flag is set."""
        fused = {id(p) for p in params if ops.optim_update_available(p)}
        written = []
        for p in params:
            if id(p) in fused:
                continue
            written.append(p)
            slots = optimizer._slots.get(optimizer._key(p), {})
            written += [v for v in slots.values() if isinstance(v, Tensor)]
        with no_grad():
            saved = [t.clone() for t in written]
        with ops.skipping_when(self.found) as done:
            update()
        if not fused <= done:  # a rule took its composed path after all: no guard was made
            raise errors.GraphBreak(f"{optimizer.name}: an update expected to read the skip "
                                    f"flag ran as its composed sequence", op="GradScaler")
        with no_grad():
            for t, old in zip(written, saved):
                F.where(self.found, old, t, out=t)

    def update_scale(self):
        """torch's _amp_update_scale_ on the tensors."""
        with no_grad():
            successful = F.add(self.tracker, 1.0)
            at_interval = F.eq(successful, self.interval)
            grown = F.mul(self.scale, self.growth)
            grow = F.logical_and(at_interval, F.isfinite(grown))
            kept = F.where(grow, grown, self.scale)
            new_scale = F.where(self.found, F.mul(self.scale, self.backoff), kept)
            zero = F.mul(self.tracker, 0.0)
            new_tracker = F.where(F.logical_or(self.found, at_interval), zero, successful)
            self.scale.copy_(new_scale)
            self.tracker.copy_(new_tracker)

    def settle_after_runs(self, optimizer):
        """Registers, in the plan being recorded, the host bookkeeping of a device-decided
        skip: the optimiser's Python state is noted before each run's update hooks advance it
        (a replay hook registered ahead of the optimiser's) and put back after a run whose
        found flag is set."""
        saved = [optimizer._python_state()]

        def note():
            saved[0] = optimizer._python_state()

        def settle():
            if bool(self.found.item()):
                optimizer._set_python_state(saved[0])
        recording.on_replay(note)
        recording.after_run(settle)
