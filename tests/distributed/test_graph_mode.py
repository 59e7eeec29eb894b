"""Data-parallel steps in graph mode: DistOpt.backward_and_update (and _half) in a SINGA-style
train_one_batch, and fit with DataParallel (a short last batch: a second plan), recorded
once and replayed, equal the same 2-rank training run eagerly (float64: exactly equal here;
tolerance 1e-12 relative, room for a fused chain rounding differently) and, for DistOpt, one
process on the union of the shards (1e-6). The bucket reductions run between the plan's
segments: the plan is cut once per bucket and once before the update, and every step after
the second is a replay (no step falls back to eager). With gradient_as_bucket_view (the
default) the recorded backward writes the gradients into the buckets: no copy is recorded;
"copying" runs the same with it off (large gradients reduced in their own memory)."""
import pytest

from .mpirun import assert_close, load, load_json, needs_mpi, run

pytestmark = needs_mpi


@pytest.mark.parametrize("extra", [[], ["--views", 0, "--solo_bytes", 1024],
                                   ["--method", "half"], ["--way", "fit"]],
                         ids=["plain", "copying", "half", "fit"])
def test_graph_mode_equals_eager_on_2_ranks(tmp_path, extra):
    graph, eager = tmp_path / "graph", tmp_path / "eager"
    run("graph_steps.py", graph, "--graph", 1, *extra, n=2)
    run("graph_steps.py", eager, "--graph", 0, *extra, n=2)
    assert_close(load(f"{eager}.npz"), load(f"{graph}.npz"), 1e-12, "graph vs eager, 2 ranks")
    for r in (0, 1):  # every rank holds the very same model
        assert_close(load(f"{graph}.rank0.npz"), load(f"{graph}.rank{r}.npz"), 0,
                     f"rank {r} vs rank 0")
    got = load_json(f"{graph}.json")
    stats = got["stats"]
    if "--way" in extra:  # 203 rows in batches of 30 for 3 epochs: 21 steps, 2 signatures
        assert stats["fit"] == {"eager": 2, "recorded": 2, "replayed": 17, "plans": 2}, stats
    else:
        assert stats["train_one_batch"] == {"eager": 1, "recorded": 1, "replayed": 4,
                                            "plans": 1}, stats
        # a cut per bucket and one before the update: buckets + 2 core plans in a row
        assert stats["segments"] == [stats["buckets"][0] + 2] and stats["buckets"][0] >= 3, \
            stats
        if not extra:  # backward wrote the gradients into the buckets when it was recorded
            assert stats["copied"] == [4, 0, 0, 0, 0, 0], stats
            assert stats["backward_copies"] == 0, stats  # and the plan holds no copy
        elif "--views" in extra:  # the two biases are copied into fused buckets
            assert stats["backward_copies"] == 2, stats
    assert load_json(f"{eager}.json")["losses"] == pytest.approx(got["losses"], rel=1e-12)


def test_graph_mode_on_2_ranks_equals_one_process(tmp_path):
    ref, graph = tmp_path / "ref", tmp_path / "graph"
    run("graph_steps.py", ref, "--graph", 0)
    run("graph_steps.py", graph, "--graph", 1, n=2)
    assert_close(load(f"{ref}.npz"), load(f"{graph}.npz"), 1e-6, "graph on 2 ranks vs alone")
