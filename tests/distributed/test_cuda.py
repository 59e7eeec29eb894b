"""Data-parallel training on cuda tensors (the emulated backend in CI: HL_CUDA_EMULATE=1):
MPI reduces host memory, so each gradient is staged through the host (copied down, reduced,
copied back to the parameter's device). 2 ranks on cuda equal 2 ranks on the CPU: DistOpt
in float64 (1e-9 relative), fit in float32 (1e-6: the cuda kernels round differently from
the CPU's). In graph mode a cuda step runs eagerly, with a warning saying why."""
import pytest

from .mpirun import assert_close, load, load_json, needs_mpi, run

pytestmark = [needs_mpi, pytest.mark.gpu]


@pytest.mark.parametrize("extra,rtol", [(["--solo_bytes", 1024], 1e-9),
                                        (["--way", "fit"], 1e-6)], ids=["distopt", "fit"])
def test_cuda_ranks_equal_cpu_ranks(tmp_path, extra, rtol):
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, *extra, n=2)
    run("graph_steps.py", cuda, "--graph", 0, "--device", "cuda", *extra, n=2)
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), rtol, "cuda vs cpu, 2 ranks")
    assert_close(load(f"{cuda}.rank0.npz"), load(f"{cuda}.rank1.npz"), 0, "rank 1 vs 0")


def test_model_moved_to_cuda_after_its_buckets_were_made(tmp_path):
    """3 steps on the CPU (backward writing into the buckets), then model.to("cuda"): the
    gradients, now on the device, are staged through the host into the same buckets; the
    run equals the one on the CPU throughout (float64, 1e-9). Plain SGD: optimiser slots
    (momentum) stay where they were made when a model moves, which no optimiser handles."""
    cpu, moved = tmp_path / "cpu", tmp_path / "moved"
    run("graph_steps.py", cpu, "--graph", 0, "--momentum", 0, n=2)
    run("graph_steps.py", moved, "--graph", 0, "--momentum", 0, "--device", "cuda",
        "--move_at", 3, n=2)
    assert_close(load(f"{cpu}.npz"), load(f"{moved}.npz"), 1e-9, "moved vs cpu, 2 ranks")


def test_cuda_graph_mode_runs_eagerly_with_a_reason(tmp_path):
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    run("graph_steps.py", cpu, "--graph", 0, n=2)
    proc, _ = run("graph_steps.py", cuda, "--graph", 1, "--device", "cuda", n=2)
    assert "staged through host memory for MPI, which a plan does not record" in proc.stderr
    stats = load_json(f"{cuda}.json")["stats"]["train_one_batch"]
    assert stats["eager"] == 6 and stats["replayed"] == 0, stats
    assert_close(load(f"{cpu}.npz"), load(f"{cuda}.npz"), 1e-9, "cuda graph vs cpu eager")
