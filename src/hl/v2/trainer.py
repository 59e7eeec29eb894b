"""paddle.trainer.SGD: v2's trainer, driven through hl.training's Loop (the loop fit uses).

The costs' subgraph is an hl Module (network.Network); a pass of the reader is an epoch, a
batch is a step, and v2's events are fired by a callback on the loop's hooks (plus
EndForwardBackward from the step, between backward and the update). The step minimises the
sum of the batch's per-sample costs, as v2 did, with the v2 optimiser built from
update_equation.

Before the first update, train() reads the reader once and checks every sample (field
count, dimensions, integer ranges), so bad data stops training before any parameter has
changed; test() and infer() check each batch as they read it, since they change nothing."""
import contextlib
import copy
import math

from .. import errors
from ..autograd import no_grad
from ..autograd import functional as F
from ..autograd.engine import backward
from ..layers.layer import Layer
from ..training.callbacks import Callback, CallbackList
from ..training.data import Source
from ..training.distributed import resolve as resolve_distribute
from ..training.loop import Loop
from ..training.step import mode
from . import event as v2_event
from .feeder import Feeder
from .graph import check_layers, topological
from .network import Network
from . import parallel
from .parallel import Shards
from .parameters import Parameters

__all__ = ["SGD"]


def _evaluators(network):
    return [e for op in network.operators if op.is_cost for e in op.evaluators]


def _fresh(evaluators):
    out = [copy.copy(e) for e in evaluators]
    for e in out:
        e.reset()
    return out


def _metrics(evaluators):
    return {e.name: e.result() for e in evaluators}


def _total_cost(values, costs):
    """(what backward starts from, the cost to report): sums of the batch's costs, the
    first weighted by each cost layer's coeff."""
    objective = reported = None
    for v, c in zip(values, costs):
        s = F.sum(v)
        weighted = s * c.op.coeff if c.op.coeff != 1.0 else s
        objective = weighted if objective is None else objective + weighted
        reported = s if reported is None else reported + s
    return objective, reported


def _check_reader(reader, what):
    if not callable(reader):
        raise errors.ValueError(f"{what}: reader must be a v2 reader (a function returning an "
                                f"iterator of batches, e.g. paddle.batch(...)), got "
                                f"{type(reader).__name__}")


class SGD:
    """``SGD(cost, parameters, update_equation, extra_layers=None, is_local=True)``.
    hl adds ``use_graph=True``: training steps run as recorded plans (hl's graph mode; the
    EndForwardBackward event then fires before the plan that computes the gradients)."""

    def __init__(self, cost, parameters, update_equation, extra_layers=None, is_local=True,
                 pserver_spec=None, use_etcd=True, use_graph=False):
        costs = check_layers(cost, "paddle.trainer.SGD")
        for c in costs:
            if not c.op.is_cost:
                raise errors.ValueError(
                    f"paddle.trainer.SGD: cost {c.name!r} is a {c.op.kind} layer, not a cost "
                    f"layer; pass the output of classification_cost, cross_entropy_cost or "
                    f"square_error_cost")
        if not isinstance(parameters, Parameters):
            raise errors.ValueError(f"paddle.trainer.SGD: parameters must come from "
                                    f"paddle.parameters.create(cost), got "
                                    f"{type(parameters).__name__}")
        if not hasattr(update_equation, "build"):
            raise errors.ValueError(f"paddle.trainer.SGD: update_equation must be a "
                                    f"paddle.optimizer object (Momentum, Adam, ...), got "
                                    f"{type(update_equation).__name__}")
        if not is_local:
            raise errors.UnsupportedError("paddle.trainer.SGD: is_local=False (parameter "
                                          "servers) is not supported; train locally")
        extras = check_layers(extra_layers, "extra_layers") if extra_layers else []
        self._costs = costs
        self._parameters = parameters
        self._network = Network(costs + extras, parameters)
        self._optimizer = update_equation.build(parameters.configs())
        self._network.optim = self._optimizer  # what hl callbacks find as model.optimizer
        if use_graph:
            self._network.graph(True)
        self._graph_data = {op.name for op in topological(costs + extras) if op.is_data}

    @property
    def network(self):
        """The hl Module the trainer trains (the costs' subgraph)."""
        return self._network

    @property
    def optimizer(self):
        return self._optimizer

    def _feeder(self, feeding, what):
        feeder = Feeder(self._network.data_layers, feeding, what)
        feeder.check_names(self._graph_data)
        return feeder

    @contextlib.contextmanager
    def _averaged(self):
        """The parameters as the optimiser's model average has them (ModelAverage), put back
        afterwards; the parameters themselves without one."""
        avg = getattr(self._optimizer, "averaged", None)
        if avg is None:
            yield
            return
        with avg(list(self._network.get_params().values())):
            yield

    # ---- training ---------------------------------------------------------------------

    def train(self, reader, num_passes=1, event_handler=None, feeding=None, distribute=None):
        """``distribute=True`` (or a distribution set with hl.distribution.set_distribution)
        trains data-parallel on the ranks mpiexec started: rank 0 reads the reader, each
        rank trains on its slice of every batch, and the gradients are summed, so the run
        equals one process's (hl/v2/parallel.py). Alone, it changes nothing."""
        what = "paddle.trainer.SGD.train"
        _check_reader(reader, what)
        if isinstance(num_passes, bool) or not isinstance(num_passes, int) or num_passes < 0:
            raise errors.ValueError(f"{what}: num_passes must be an integer >= 0, got "
                                    f"{num_passes!r}")
        world = resolve_distribute(distribute, what)
        shards = Shards(world, self._network) if world is not None else None
        handler = event_handler if event_handler is not None else (lambda e: None)
        if shards is not None and not shards.is_main:
            handler = lambda e: None  # noqa: E731  (rank 0 prints and writes)
        elif shards is not None:
            handler = _on_main_rank_only(handler)
        feeder = self._feeder(feeding, what)
        batches = 0
        if shards is None or shards.is_main:
            for i, batch in enumerate(reader()):  # every sample checked before any update
                feeder.arrays(batch, i)
                batches += 1
        if shards is not None:
            batches = shards.count(batches)
        if batches == 0:
            raise errors.ValueError(f"{what}: the reader yields no batch")

        def read():
            for i, batch in enumerate(reader()):
                yield feeder.arrays(batch, i)

        def epoch_batches(epoch):
            return read() if shards is None else shards.batches(read)
        step = _TrainStep(self, feeder, handler, shards)
        bridge = _EventBridge(handler, step, self._optimizer)
        callbacks = CallbackList([bridge], self._network, {"epochs": num_passes,
                                                           "steps": batches})
        with mode(self._network, True):
            try:
                Loop(self._network, callbacks).run(Source(epoch_batches, reiterable=True),
                                                   step, num_passes, what=what)
            except errors.NonFiniteLossError:
                raise errors.NonFiniteLossError(
                    f"{what}: the cost became {step.last_cost} at pass {step.pass_id}, batch "
                    f"{step.batch_id}; that batch's update was not applied, so the parameters "
                    f"are those before it. Check the data for NaN or infinite values, or "
                    f"lower the learning rate") from None

    # ---- testing and saving -----------------------------------------------------------

    def test(self, reader, feeding=None, distribute=None):
        """The cost per sample and the evaluators' values over the reader's batches, in
        evaluation mode (with the model average when the optimiser keeps one).

        ``distribute=True`` (or a distribution set with hl.distribution.set_distribution),
        called on every rank: rank 0 reads the reader and broadcasts each batch, every rank
        evaluates its slice, and the cost and evaluators are summed over the ranks, so
        every rank gets the whole reader's result. Inside train's event handler (rank 0
        only) it runs alone on rank 0."""
        what = "paddle.trainer.SGD.test"
        _check_reader(reader, what)
        feeder = self._feeder(feeding, what)
        world = parallel.resolve(distribute, what)
        evaluators = _fresh(_evaluators(self._network))
        total, samples = 0.0, 0

        def read():
            for i, batch in enumerate(reader()):
                yield feeder.arrays(batch, i)
        batches = read() if world is None else parallel.broadcast_batches(world, read, what)
        with mode(self._network, False), no_grad(), self._averaged():
            for arrays in batches:
                part, n = (arrays, None) if world is None else parallel.my_slice(arrays,
                                                                                 world)
                if n is None:
                    first = next(iter(arrays.values()))
                    n = len(first[1] if isinstance(first, tuple) else first)
                samples += n
                if part is None:  # this rank's slice of a short batch is empty
                    continue
                values = Layer.__call__(self._network, feeder.values(part))
                total += float(_total_cost(values, self._costs)[1].item())
                for e in evaluators:
                    e.update(self._network.last_values)
        if world is not None:
            total = parallel.sum_over(world, [total], what + " (the cost)")[0]
            parallel.merge_evaluators(world, evaluators, what)
        if samples == 0:
            raise errors.ValueError(f"{what}: the reader yields no batch")
        return v2_event.TestResult(total / samples, _metrics(evaluators))

    def save_parameter_to_tar(self, f):
        """The parameters (model-averaged when the optimiser averages) in v2's tar format."""
        with self._averaged():
            self._parameters.to_tar(f)


def _on_main_rank_only(handler):
    """train's event handler on rank 0 of a data-parallel run: test() / infer() called in it
    run alone there (parallel.resolve)."""
    def call(event):
        with parallel.main_rank_only():
            return handler(event)
    return call


class _TrainStep:
    """One batch: forward over the costs' subgraph, backward from the summed cost,
    EndForwardBackward, then the v2 optimiser's update of each parameter."""

    def __init__(self, trainer, feeder, handler, shards=None):
        self.trainer, self.feeder, self.handler = trainer, feeder, handler
        self.shards = shards
        evaluators = _evaluators(trainer._network)
        self.batch_evals, self.pass_evals = _fresh(evaluators), _fresh(evaluators)
        self.pass_id, self.batch_id = 0, 0
        self.skipped = False
        self.last_cost = None

    def __call__(self, arrays):
        t = self.trainer
        net, opt = t._network, t._optimizer
        shards = self.shards
        if shards is None:
            first = next(iter(arrays.values()))  # an array, or (padded array, lengths)
            n = len(first[1] if isinstance(first, tuple) else first)
        else:
            arrays, n = shards.mine(arrays)  # None: this rank's slice is empty
        start = getattr(opt, "start_batch", None)
        if start is not None:
            start(n)
        for e in self.batch_evals:
            e.reset()
        # data-parallel steps run eagerly: their gradients go through MPI on the host
        runner = net._graph_runner() if shards is None else None
        if shards is not None:
            total, value = None, 0.0
            if arrays is not None:
                _, total, reported, _ = _forward(net, t._costs, self.feeder.values(arrays))
                value = float(reported.item())
                for e in self.batch_evals:
                    e.update(net.last_values)
            value = shards.total(value)
            shards.merge(self.batch_evals)
            update = lambda run: self._update(total, shards=shards) if run else None  # noqa: E731
        elif runner is None:
            _, total, reported, _ = _forward(net, t._costs, self.feeder.values(arrays))
            value = float(reported.item())
            update = lambda run: self._update(total) if run else None  # noqa: E731
        else:
            (_, total, reported, last), update = runner.run(
                "v2 train", lambda feeds: _forward(net, t._costs, feeds),
                (self.feeder.values(arrays),),
                second=lambda outputs: self._update(outputs[1], fire=False))
            net.__dict__["last_values"] = last  # this signature's tensors, now filled
            value = float(reported.item())
        if shards is None:
            for e in self.batch_evals:
                e.update(net.last_values)
        self.last_cost = value
        self.skipped = not math.isfinite(value)
        for e, whole in zip(self.batch_evals, self.pass_evals):
            whole.absorb(e)
        if runner is not None and not self.skipped:
            self.handler(v2_event.EndForwardBackward(self.pass_id, self.batch_id, net))
        update(not self.skipped)
        finish = getattr(opt, "finish_batch", None)
        if finish is not None:
            finish()
        else:
            opt.step_count += 1
        logs = {"loss": value / n}
        logs.update(_metrics(self.batch_evals))
        return logs


    def _update(self, total, fire=True, shards=None):
        """Backward from the summed cost (summed over the ranks when shards) and the
        optimiser's update of each parameter (with v2's EndForwardBackward event between them
        when fire)."""
        net, opt = self.trainer._network, self.trainer._optimizer
        pairs = list(backward(total)) if shards is None else shards.gradients(total)
        if fire:
            self.handler(v2_event.EndForwardBackward(self.pass_id, self.batch_id, net))
        for p, g in pairs:
            opt.update(p, g)


def _forward(net, costs, feeds):
    """The forward over the costs' subgraph: (values, summed cost, reported cost, the
    network's last_values)."""
    values = Layer.__call__(net, feeds)
    total, reported = _total_cost(values, costs)
    return values, total, reported, net.last_values


class _EventBridge(Callback):
    """The loop's hooks as v2's events."""

    def __init__(self, handler, step, optimizer):
        super().__init__()
        self.handler, self.step, self.optimizer = handler, step, optimizer

    def on_epoch_begin(self, epoch, logs=None):
        self.step.pass_id = epoch
        self.handler(v2_event.BeginPass(epoch))
        for e in self.step.pass_evals:
            e.reset()
        start = getattr(self.optimizer, "start_pass", None)
        if start is not None:
            start(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        self.step.batch_id = batch
        self.handler(v2_event.BeginIteration(self.step.pass_id, batch))

    def on_train_batch_end(self, batch, logs=None):
        logs = dict(logs or {})
        cost = logs.pop("loss", float("nan"))
        self.handler(v2_event.EndIteration(self.step.pass_id, batch, cost, logs,
                                           self.model))

    def on_epoch_end(self, epoch, logs=None):
        finish = getattr(self.optimizer, "finish_pass", None)
        if finish is not None:
            finish()
        self.handler(v2_event.EndPass(epoch, _metrics(self.step.pass_evals), self.model))
