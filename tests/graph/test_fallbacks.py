"""What a plan cannot hold makes graph mode run eagerly, with one warning naming the cause,
and never gives wrong numbers: host reads, data-dependent shapes, the cache's bound; and a
plan whose parameters, optimiser or modes changed is recorded again."""
import warnings

import numpy as np
import pytest

import hl
from hl import errors

from .models import MLP, batches, params, stats, twins


def test_host_read_while_recording_is_an_error_not_garbage():
    from hl.graph import recording
    x = hl.tensor([1.0, 2.0, 3.0])
    recording.begin()
    try:
        s = x.sum()
        for read in (s.item, lambda: float(s), s.numpy, lambda: bool(s), lambda: int(s)):
            with pytest.raises(errors.GraphBreak, match="while a plan is being recorded"):
                read()
    finally:
        recording.abandon()
    assert float(x.sum()) == 6.0


class ReadsInForward(MLP):
    """A forward that reads a value on the host (a graph break)."""

    def forward(self, x):
        scale = 1.0 + 0.0 * float(x.sum())
        return super().forward(x) * scale


class NonzeroInForward(MLP):
    def forward(self, x):
        out = super().forward(x)
        kept = hl.ops.nonzero(x[:, 0] > 0)  # a data-dependent shape
        return out + 0.0 * kept.shape[0]


@pytest.mark.parametrize("cls, cause", [(ReadsInForward, "float(tensor)"),
                                        (NonzeroInForward, "nonzero")])
def test_graph_break_runs_eagerly_with_one_warning(cls, cause, rng):
    models = []
    for graph in (False, True):
        hl.manual_seed(0)
        m = cls(hl.opt.Adam(lr=0.01))
        m.compile([hl.ones(8, 12)], is_train=True, use_graph=graph)  # real values: it reads them
        models.append(m)
    eager, graph = models
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x, y in batches(rng, 6):
            _, le = eager(hl.tensor(x), hl.tensor(y))
            _, lg = graph(hl.tensor(x), hl.tensor(y))
            assert float(lg) == float(le)
    mine = [w for w in caught if "graph mode" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert cause in str(mine[0].message)
    assert stats(graph) == {"eager": 6, "recorded": 0, "replayed": 0, "plans": 0}
    for k, v in params(eager).items():  # the abandoned recording left no trace
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)
    assert graph.optim.step_count == eager.optim.step_count == 6


def test_cache_is_bounded_and_warns_once(rng):
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.05, momentum=0.9))
    graph._graph_runner().cache_size = 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rnd in range(3):
            for n in (8, 5, 3, 2):  # four signatures, two plans allowed
                for x, y in batches(rng, 1, batch=n):
                    _, le = eager(hl.tensor(x), hl.tensor(y))
                    _, lg = graph(hl.tensor(x), hl.tensor(y))
                    assert float(lg) == float(le)
    mine = [str(w.message) for w in caught if "graph mode" in str(w.message)]
    assert len(mine) == 1 and "2 input signatures" in mine[0]
    s = stats(graph)
    assert s["plans"] == 2 and s["replayed"] == 2 and s["eager"] == 2 + 6


def test_swapped_parameter_or_optimiser_state_records_again(rng):
    eager, graph = twins(lambda: hl.opt.Adam(lr=0.01))
    data = batches(rng, 12)
    for x, y in data[:4]:
        eager(hl.tensor(x), hl.tensor(y))
        graph(hl.tensor(x), hl.tensor(y))
    for m in (eager, graph):  # a new tensor object for a parameter
        m.l2.__dict__["b"] = hl.zeros(4)
        m.l2.b.requires_grad = True
        m.l2.b.stores_grad = True
    saved = eager.optim.get_states()
    for x, y in data[4:8]:
        eager(hl.tensor(x), hl.tensor(y))
        graph(hl.tensor(x), hl.tensor(y))
    for m in (eager, graph):
        m.optim.set_states(saved)  # new slot tensors: the plan must not update the old ones
    for x, y in data[8:]:
        _, le = eager(hl.tensor(x), hl.tensor(y))
        _, lg = graph(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le)
    for k, v in params(eager).items():
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)
    # recorded: at the start, after the swap (the first try met the new parameter's missing
    # slots: that step ran eagerly, the next recorded), after set_states
    assert stats(graph)["recorded"] == 3


def test_mode_change_records_again(rng):
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.05), batchnorm=True)
    for i, (x, y) in enumerate(batches(rng, 10)):
        if i == 5:
            eager.bn.eval()
            graph.bn.eval()
        _, le = eager(hl.tensor(x), hl.tensor(y))
        _, lg = graph(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le)
    assert stats(graph)["recorded"] == 2


def test_optimiser_configuration_change_records_again(rng):
    """A hyperparameter is a constant of a plan: changing it makes the next step record again
    (and the result stays eager's); assigning the same value, or adding an attribute the
    configuration stamp ignores (not a plain number), does not. graph_check() agrees with
    comparing graph_stamp() at each step."""
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.05, momentum=0.9))
    checks = []
    for i, (x, y) in enumerate(batches(rng, 16)):
        stamp, check = graph.optim.graph_stamp(), graph.optim.graph_check()
        for m in (eager, graph):
            if i == 4:
                m.optim.momentum = 0.5
            if i == 7:
                m.optim.momentum = 0.5  # the same value again
            if i == 9:
                m.optim.note = ["not", "a", "number"]
            if i == 11:
                m.optim.extra = 3  # a new plain attribute: part of the stamp
            if i == 13:
                del m.optim.extra
        checks.append((check(), graph.optim.graph_stamp() == stamp))
        _, le = eager(hl.tensor(x), hl.tensor(y))
        _, lg = graph(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le), f"step {i}"
    assert [i for i, (a, b) in enumerate(checks) if a != b] == []
    assert [i for i, (a, _) in enumerate(checks) if not a] == [4, 11, 13]
    for k, v in params(eager).items():
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)
    # recorded at steps 1, 5 (momentum), 12 (extra added) and 14 (extra deleted)
    assert stats(graph)["recorded"] == 4


def test_graph_switch_and_pickling(tmp_path, rng):
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.05))
    for x, y in batches(rng, 4):
        graph(hl.tensor(x), hl.tensor(y))
    path = tmp_path / "m.hl"
    hl.save(graph, str(path))
    back = hl.load(str(path), trusted=True)
    assert back.graph_mode
    for x, y in batches(rng, 4):
        _, a = graph(hl.tensor(x), hl.tensor(y))
        _, b = back(hl.tensor(x), hl.tensor(y))
        assert float(a) == float(b)
    graph.graph(False)
    assert graph._graph_runner() is None


def test_compile_switches():
    m = MLP(hl.opt.SGD(lr=0.1))
    m.compile(optimizer="sgd", loss="cross_entropy", jit_compile=True)
    assert m.graph_mode and m._graph_runner() is not None
    m.compile(optimizer="sgd", loss="cross_entropy", jit_compile=False)
    assert not m.graph_mode
    m.compile([hl.Placeholder((2, 12))], use_graph=True, sequential=False)
    assert m.graph_mode and m._graph_runner().sequential is False
    with pytest.raises(errors.ValueError, match="jit_compile"):
        m.compile(optimizer="sgd", jit_compile="xla")
