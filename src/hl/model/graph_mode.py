"""Graph mode for a Module: its training step, evaluation and prediction run as recorded plans
(hl.graph.PlanCache), switched on by ``compile([x], use_graph=True)``, ``model.graph(True)`` or
Keras's ``compile(..., jit_compile=True)``.

A plan holds tensors, not names: it stays valid while the model's parameters and buffers are
the same tensor objects, every layer keeps the training flag it was recorded with, and the
optimiser and loss are the same objects with the same configuration. ``still_valid`` checks
exactly that before each replay (a few pointer comparisons per state); anything else re-records.
"""
import functools
from operator import is_

from .. import _core
from .._tensor import Tensor, _wrap
from ..graph import DEFAULT_SIZE, PlanCache


class GraphRunner:
    """A model's plan caches, one per kind of step."""

    def __init__(self, model, sequential=True, cache_size=DEFAULT_SIZE):
        self.model = model
        self.sequential = sequential
        self.cache_size = cache_size
        self.caches = {}
        self.inside = False  # a step function is running (nested steps run plainly)

    def cache(self, what):
        c = self.caches.get(what)
        if c is None:
            c = self.caches[what] = PlanCache(f"{type(self.model).__name__}.{what}",
                                              self.cache_size, topological=not self.sequential)
        return c

    def run(self, what, fn, args, second=None):
        """fn(*args) (and second on its outputs) through the plan cache of `what`."""
        if self.inside:
            outputs = fn(*args)
            return outputs if second is None else (outputs, lambda run: second(outputs)
                                                   if run else None)
        model = self.model
        key = (model.__dict__["_training"], id(model.__dict__.get("optim")),
               id(model.__dict__.get("loss_fn")))
        self.inside = True
        try:
            return self.cache(what).call(fn, args, key, self.validity, second)
        finally:
            self.inside = False

    def validity(self):
        """A check of everything a plan recorded now depends on besides its inputs. It runs
        before every replay, so it is a few C-level passes (map over the held dicts), no
        Python loop: the parameters, buffers and training flags are the same objects (a
        flag set to an equal value of another type, 1 for True, records once more), the
        optimiser's configuration unchanged (its graph_check)."""
        model = self.model
        dicts, names, values = [], [], []
        for _, layer in model.named_layers():
            d = layer.__dict__
            for name in ("_training",) + tuple(layer._param_names) + tuple(layer._state_names):
                dicts.append(d)
                names.append(name)
                values.append(d[name])
        optim = model.__dict__.get("optim")
        optim_ok = (optim.graph_check() if hasattr(optim, "graph_check") else
                    _stamp_check(optim) if hasattr(optim, "graph_stamp") else None)
        get = dict.get

        def still_valid():
            return (all(map(is_, map(get, dicts, names), values)) and
                    (optim_ok is None or optim_ok()))
        return still_valid

    def stats(self):
        """{what: {'eager': n, 'recorded': n, 'replayed': n, 'plans': n}} (for tests and
        benchmarks: how each kind of step ran)."""
        return {w: dict(c.stats, plans=len(c)) for w, c in self.caches.items()}


def _stamp_check(optim):
    """The validity check of an optimiser that has graph_stamp() alone."""
    stamp = optim.graph_stamp()
    return lambda: optim.graph_stamp() == stamp


def runner_of(model):
    """The model's GraphRunner when graph mode is on (made again after unpickling), else
    None."""
    d = model.__dict__
    r = d.get("_graph")
    if r is None and d.get("graph_mode"):
        r = d["_graph"] = GraphRunner(model, d.get("sequential", True))
    return r


def graph_step(fn):
    """Wraps a Module's train_one_batch so that in graph mode it runs through the plan cache
    (the wrapper is what subclasses' train_one_batch methods become; see Module)."""
    if getattr(fn, "_graph_step", False):
        return fn

    @functools.wraps(fn)
    def train_one_batch(self, *args, **kwargs):
        runner = runner_of(self)
        if runner is None:
            return fn(self, *args, **kwargs)
        if kwargs:
            out = runner.run("train_one_batch", lambda a, k: fn(self, *a, **k), (args, kwargs))
        else:  # the usual call: the signature's walk has one level less
            out = runner.run("train_one_batch", functools.partial(fn, self), args)
        return _copied(out)
    train_one_batch._graph_step = True
    return train_one_batch


def _copied(out):
    """A replayed plan writes into the same output tensors each step: the caller gets copies,
    so values kept from one step do not change under it at the next."""
    if isinstance(out, Tensor):
        return _wrap(_core.cast(out._h, out._dtype.code), out._dtype)  # no history
    if isinstance(out, (list, tuple)):
        return type(out)(_copied(o) for o in out)
    return out
