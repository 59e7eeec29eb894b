"""Data-parallel training on cuda tensors (the emulated backend in CI: HL_CUDA_EMULATE=1).

Two ways, both tested: NCCL (the default when it loads: rank 0's id goes over MPI, the
buckets are device memory reduced by ncclAllReduce on the compute stream; under emulation
the emulated NCCL of libcore/cuda/emu/nccl.cpp serves the same entry points over shared
memory), and host staging through MPI (HL_DIST_NCCL=0: each gradient copied to the host,
reduced by MPI, copied back). References: the same training on CPU ranks, and one process
on the union of the shards. Tolerances: DistOpt in float64 1e-9 relative, fit in float32
1e-6 (the cuda kernels round differently from the CPU's). Graph mode replays with NCCL
(staged steps run eagerly). Faults on the NCCL path: a rank that raises, is killed or hangs
stops the others with an hl error within the timeout."""
import pytest

import hl

from .mpirun import assert_close, load, load_json, needs_mpi, run

pytestmark = [needs_mpi, pytest.mark.gpu]


def gpus_for(n):
    """NCCL needs a GPU per rank: on real hardware with fewer, the NCCL runs skip (gpu tests
    may); the emulation gives every process a device of its own."""
    few = (hl.cuda_available() and not hl.cuda.is_emulated()
           and hl.cuda.device_count() < n)
    return pytest.mark.skipif(few, reason=f"NCCL on {n} ranks needs {n} GPUs")


WAYS = {"nccl": {}, "staged": {"HL_DIST_NCCL": "0"}}
BACKEND = {"nccl": "nccl", "staged": "mpi"}
WAY_PARAMS = [pytest.param("nccl", marks=gpus_for(2)), "staged"]


@pytest.mark.parametrize("way", WAY_PARAMS)
@pytest.mark.parametrize("extra,rtol", [(["--solo_bytes", 1024], 1e-9),
                                        (["--way", "fit"], 1e-6)], ids=["distopt", "fit"])
def test_cuda_ranks_equal_cpu_ranks(tmp_path, way, extra, rtol):
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, *extra, n=2)
    run("graph_steps.py", cuda, "--graph", 0, "--device", "cuda", *extra, n=2, env=WAYS[way])
    assert load_json(f"{cuda}.json")["backend"] == BACKEND[way]
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), rtol, "cuda vs cpu, 2 ranks")
    assert_close(load(f"{cuda}.rank0.npz"), load(f"{cuda}.rank1.npz"), 0, "rank 1 vs 0")


@gpus_for(4)
@pytest.mark.parametrize("extra", [["--solo_bytes", 1024], ["--way", "fit"]],
                         ids=["distopt", "fit"])
def test_nccl_on_4_ranks_equals_one_process_on_the_union(tmp_path, extra):
    """float64, 6 steps (DistOpt: several buckets and in-place solo gradients) or 3 epochs of
    fit with a short last batch: 4 NCCL ranks on cuda vs one CPU process, 1e-6 relative."""
    alone, cuda = tmp_path / "alone", tmp_path / "cuda"
    run("graph_steps.py", alone, "--graph", 0, *extra)
    run("graph_steps.py", cuda, "--graph", 0, "--device", "cuda", *extra, n=4)
    assert load_json(f"{cuda}.json")["backend"] == "nccl"
    assert_close(load(f"{alone}.npz"), load(f"{cuda}.npz"), 1e-6, "4 NCCL ranks vs alone")
    assert_close(load(f"{cuda}.rank0.npz"), load(f"{cuda}.rank3.npz"), 0, "rank 3 vs 0")


@gpus_for(2)
def test_half_on_the_wire_through_nccl_is_close_to_the_cpu_ranks(tmp_path):
    """backward_and_update_half: float16 buckets summed by NCCL in float16 (SINGA's
    ncclHalf) vs MPI summing the float16 contributions in float32: the same steps up to
    float16 rounding of the sums (float16 has 11 bits: 1e-3 relative bounds it here)."""
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, "--method", "half", n=2)
    run("graph_steps.py", cuda, "--graph", 0, "--method", "half", "--device", "cuda", n=2)
    assert load_json(f"{cuda}.json")["backend"] == "nccl"
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), 1e-3, "half: NCCL vs MPI")
    assert_close(load(f"{cuda}.rank0.npz"), load(f"{cuda}.rank1.npz"), 0, "rank 1 vs 0")


@gpus_for(2)
@pytest.mark.parametrize("extra,rtol", [([], 1e-9), (["--way", "fit"], 1e-6)],
                         ids=["distopt", "fit"])
def test_nccl_graph_mode_replays_with_the_reductions_between_segments(tmp_path, extra, rtol):
    """Graph mode on cuda with NCCL: the step is recorded once and replayed, each bucket's
    ncclAllReduce enqueued between the plan's segments; the result equals CPU ranks run
    eagerly (DistOpt float64 1e-9; fit float32 with jit_compile 1e-6)."""
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, *extra, n=2)
    proc, _ = run("graph_steps.py", cuda, "--graph", 1, "--device", "cuda", *extra, n=2)
    info = load_json(f"{cuda}.json")
    assert info["backend"] == "nccl"
    assert "runs eagerly" not in proc.stderr, proc.stderr[-3000:]
    if not extra:
        stats = info["stats"]
        assert stats["train_one_batch"]["replayed"] == 4, stats
        assert stats["segments"] == [stats["buckets"][0] + 2], stats  # a cut per bucket, +1
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), rtol, "NCCL graph vs cpu eager")
    assert_close(load(f"{cuda}.rank0.npz"), load(f"{cuda}.rank1.npz"), 0, "rank 1 vs 0")


@gpus_for(2)
def test_nccl_half_in_graph_mode_equals_nccl_half_eagerly(tmp_path):
    eager, graph = tmp_path / "eager", tmp_path / "graph"
    run("graph_steps.py", eager, "--graph", 0, "--method", "half", "--device", "cuda", n=2)
    run("graph_steps.py", graph, "--graph", 1, "--method", "half", "--device", "cuda", n=2)
    stats = load_json(f"{graph}.json")["stats"]["train_one_batch"]
    assert stats["replayed"] == 4, stats
    assert_close(load(f"{eager}.npz"), load(f"{graph}.npz"), 1e-12, "half: graph vs eager")


def test_staged_cuda_graph_mode_runs_eagerly_with_a_reason(tmp_path):
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, n=2)
    proc, _ = run("graph_steps.py", cuda, "--graph", 1, "--device", "cuda", n=2,
                  env=WAYS["staged"])
    assert "staged through host memory for MPI, which a plan does not record" in proc.stderr
    stats = load_json(f"{cuda}.json")["stats"]["train_one_batch"]
    assert stats["eager"] == 6 and stats["replayed"] == 0, stats
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), 1e-9, "cuda graph vs cpu eager")


TIMEOUT_S = 8
STARTUP_S = 20  # launching 4 ranks and importing on a loaded two-core machine


@gpus_for(4)
@pytest.mark.parametrize("mode,says", [
    ("raise", "because rank 1 failed (ValueError: a bug in the user's step 3)"),
    ("kill", "because rank 1 (process ")], ids=["raise", "kill"])
def test_a_failing_rank_stops_the_nccl_ranks_with_an_hl_error(tmp_path, mode, says):
    proc, took = run("fault.py", tmp_path / "x", "--mode", mode, "--device", "cuda", n=4,
                     timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert took < TIMEOUT_S + STARTUP_S, took
    err = proc.stderr
    assert "waited" not in err and "did not take part" not in err  # not by the timeout
    for r in (0, 2, 3):
        assert (f"hl.errors.DistributedError: hl.distributed: DistOpt's gradient allreduce "
                f"stopped on rank {r} {says}") in err, err[-4000:]


@gpus_for(2)
def test_a_stuck_rank_is_reported_after_the_timeout_on_the_nccl_path(tmp_path):
    proc, took = run("fault.py", tmp_path / "x", "--mode", "hang", "--device", "cuda", n=2,
                     timeout_s=3, check=False)
    assert proc.returncode != 0
    assert took < 3 + 3 + STARTUP_S, took
    err = proc.stderr
    assert ("did not take part within 3 s" in err or "waited 3 s for the other ranks" in err), \
        err[-3000:]


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_singas_all_reduce_on_cuda_tensors(tmp_path, way):
    """DistOpt.all_reduce / fused_all_reduce sum in place over 2 ranks (rank r holds r + 1
    times the values): exact sums, a transposed view included."""
    import numpy as np
    run("all_reduce.py", tmp_path / "x", "--device", "cuda", n=2, env=WAYS[way])
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    for r in (0, 1):
        got = load(f"{tmp_path / 'x'}.rank{r}.npz")
        assert str(got["backend"]) == BACKEND[way]
        np.testing.assert_array_equal(got["once"], base * 3)
        np.testing.assert_array_equal(got["twice"], base * 6)
        np.testing.assert_array_equal(got["u"], np.full((2, 3), 3.0))


@gpus_for(2)
def test_a_rank_without_nccl_makes_every_rank_stage_or_fail_as_asked(tmp_path):
    """The ranks choose together: one rank that cannot load NCCL makes all of them reduce
    over MPI, with a warning naming the rank and why; HL_DIST_NCCL=1 makes it an error."""
    import numpy as np
    proc, _ = run("all_reduce.py", tmp_path / "x", "--device", "cuda", "--deny_rank", 1, n=2)
    assert "NCCL cannot be used on rank 1: NCCL is not installed (the test pretends)" in \
        proc.stderr and "staged through host memory" in proc.stderr, proc.stderr[-3000:]
    got = load(f"{tmp_path / 'x'}.rank0.npz")
    assert str(got["backend"]) == "mpi"
    np.testing.assert_array_equal(got["twice"], np.arange(6).reshape(2, 3) * 6)
    proc, _ = run("all_reduce.py", tmp_path / "y", "--device", "cuda", "--deny_rank", 1, n=2,
                  env={"HL_DIST_NCCL": "1"}, check=False)
    assert proc.returncode != 0
    assert "hl.errors.DistributedError: hl.distributed: NCCL cannot be used on rank 1" in \
        proc.stderr and "require it" in proc.stderr, proc.stderr[-3000:]
