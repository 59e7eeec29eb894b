"""N ranks equal one process on the union of their shards (mpiexec -n 2 and -n 4, the
latter oversubscribed on two cores): DistOpt.backward_and_update (float64) and fit with
DataParallel / distribute=True (float32, with a short last batch that leaves some ranks no
samples). The reference is the same script run alone. Relative tolerance 1e-6."""
import os

import numpy as np
import pytest

from .mpirun import assert_close, load, load_json, needs_mpi, run

pytestmark = needs_mpi


@pytest.mark.parametrize("n,solo_bytes", [(2, 0), (4, 0), (2, 1024)])
def test_distopt_steps_equal_one_process(tmp_path, n, solo_bytes):
    """With gradient_as_bucket_view (the default) backward writes every gradient into its
    bucket after the first step (which fixes the layout and copies). solo_bytes=1024, with
    it off: both weight matrices are reduced in place in the gradients' own memory (each
    bias in a bucket of its own between them), as large layers are then by default."""
    ref, dist = tmp_path / "ref", tmp_path / "dist"
    run("distopt_steps.py", ref, "--steps", 5, "--batch", 32)
    proc, _ = run("distopt_steps.py", dist, "--steps", 5, "--batch", 32, "--solo_bytes",
                  solo_bytes, "--views", int(not solo_bytes), n=n)
    if solo_bytes:
        assert "reduced in place: 2 of 4 buckets" in proc.stdout, proc.stdout
        assert "copied into buckets per step: [4, 4, 4, 4, 4]" in proc.stdout, proc.stdout
    else:
        assert "copied into buckets per step: [4, 0, 0, 0, 0]" in proc.stdout, proc.stdout
    expected = load(f"{ref}.npz")
    assert_close(expected, load(f"{dist}.npz"), 1e-6, f"DistOpt on {n} ranks")
    first = load(f"{dist}.rank0.npz")
    for r in range(1, n):  # every rank holds the very same model
        theirs = load(f"{dist}.rank{r}.npz")
        assert all(np.array_equal(first[k], theirs[k]) for k in first)


@pytest.mark.parametrize("model,threshold,copied", [
    ("shared", 2097152, "[6, 0, 0, 0, 0, 0]"),     # a Linear used twice: summed in place
    ("unused", 300, "[6, 0, 0, 0, 0, 0]"),         # a Linear idle on odd steps; 4 buckets
    ("cnn", 300, "[6, 0, 0, 0, 0, 0]")])           # conv weight and bias, LayerNorm, Linear
def test_gradients_as_bucket_views_equal_one_process(tmp_path, model, threshold, copied):
    """Backward writes the gradients into the buckets (nothing copied after the first step):
    2 ranks equal one process on the union of the shards (float64, 1e-6 relative)."""
    ref, dist = tmp_path / "ref", tmp_path / "dist"
    common = ["--steps", 6, "--batch", 32, "--model", model, "--threshold", threshold]
    run("distopt_steps.py", ref, *common)
    proc, _ = run("distopt_steps.py", dist, *common, n=2)
    assert f"copied into buckets per step: {copied}" in proc.stdout, proc.stdout
    assert_close(load(f"{ref}.npz"), load(f"{dist}.npz"), 1e-6, f"{model} on 2 ranks")
    assert_close(load(f"{dist}.rank0.npz"), load(f"{dist}.rank1.npz"), 0, "rank 1 vs 0")


@pytest.mark.parametrize("model", ["mlp", "unused"])
def test_pytorch_style_step_equals_one_process(tmp_path, model):
    """zero_grad(); loss.backward() on two half batches (.grad accumulates); step(): the
    accumulated .grad averaged over 2 ranks equals one process on the union of the shards
    (float64, 1e-6 relative); "unused" leaves a Linear's .grad None on odd steps."""
    ref, dist = tmp_path / "ref", tmp_path / "dist"
    common = ["--steps", 4, "--batch", 32, "--method", "torch", "--model", model,
              "--threshold", 300]
    run("distopt_steps.py", ref, *common)
    run("distopt_steps.py", dist, *common, n=2)
    assert_close(load(f"{ref}.npz"), load(f"{dist}.npz"), 1e-6, f"{model}, PyTorch-style")
    assert_close(load(f"{dist}.rank0.npz"), load(f"{dist}.rank1.npz"), 0, "rank 1 vs 0")


@pytest.mark.parametrize("method", ["scaler", "scaler_torch"])
def test_grad_scaler_with_distopt_equals_one_process(tmp_path, method):
    """hl.amp.GradScaler over DistOpt (SINGA's backward_and_update and PyTorch's
    scale/step/update): gradients are averaged before the inf check, so a NaN in one rank's
    shard skips the step on every rank, and the steps equal one process on the union of the
    shards (float64, 1e-6 relative); the scale backs off once and grows as alone."""
    ref, dist = tmp_path / "ref", tmp_path / "dist"
    common = ["--steps", 6, "--batch", 32, "--method", method, "--threshold", 300]
    alone = run("distopt_steps.py", ref, *common)[0]
    proc, _ = run("distopt_steps.py", dist, *common, n=2)
    # 1024: x2 after steps 1-2, NaN at step 3 -> x0.5, x2 after steps 4-5, step 6 clean
    assert "loss scale after 6 steps: 2048.0" in alone.stdout, alone.stdout
    assert "loss scale after 6 steps: 2048.0" in proc.stdout, proc.stdout
    assert_close(load(f"{ref}.npz"), load(f"{dist}.npz"), 1e-6, f"GradScaler ({method})")
    assert_close(load(f"{dist}.rank0.npz"), load(f"{dist}.rank1.npz"), 0, "rank 1 vs 0")


def test_bucket_views_off_gives_the_same_steps(tmp_path):
    """DistOpt(gradient_as_bucket_view=False) copies every gradient in (another bucket
    layout: large tensors reduced in their own memory) and takes the very same steps."""
    on, off = tmp_path / "on", tmp_path / "off"
    common = ["--steps", 4, "--batch", 32, "--model", "unused", "--threshold", 300]
    run("distopt_steps.py", on, *common, n=2)
    proc, _ = run("distopt_steps.py", off, *common, "--views", 0, "--solo_bytes", 1024, n=2)
    assert "copied into buckets per step: [6, 4, 6, 4]" in proc.stdout, proc.stdout
    assert_close(load(f"{on}.npz"), load(f"{off}.npz"), 1e-12, "views on vs off")


@pytest.fixture(scope="module")
def fit_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("fitref") / "ref"
    run("fit_parallel.py", out)
    return out


@pytest.mark.parametrize("n,way", [(2, "keras"), (4, "distribute")])
def test_fit_data_parallel_equals_one_process(tmp_path, fit_reference, n, way):
    out = tmp_path / "dist"
    proc, _ = run("fit_parallel.py", out, "--way", way, n=n)
    ref = load(f"{fit_reference}.npz")
    got = load(f"{out}.npz")
    assert_close(ref, got, 1e-6, f"fit on {n} ranks ({way})")  # weights and predict
    ref_logs = load_json(f"{fit_reference}.rank0.json")
    logs = [load_json(f"{out}.rank{r}.json") for r in range(n)]
    for r in range(n):  # History and evaluate identical on every rank...
        assert logs[r]["history"] == logs[0]["history"]
        assert logs[r]["evaluate"] == logs[0]["evaluate"]
        assert logs[r]["optim"] == "SGD"  # fit put the user's optimiser back
    for key, values in ref_logs["history"].items():  # ...and those of one process
        np.testing.assert_allclose(logs[0]["history"][key], values, rtol=1e-6, err_msg=key)
    for key, value in ref_logs["evaluate"].items():
        np.testing.assert_allclose(logs[0]["evaluate"][key], value, rtol=1e-6, err_msg=key)
    # only rank 0 printed the progress and wrote the CSV log and the checkpoints
    assert proc.stdout.count("Epoch 1/3") == 1, proc.stdout
    written = sorted(os.listdir(tmp_path))
    assert [f for f in written if f.endswith(".csv")] == ["dist.r0.csv"]
    assert [f for f in written if f.endswith(".zip")] == [
        f"dist.r0.ck{e}.zip" for e in range(1, 4)]
    with open(f"{fit_reference}.r0.csv") as a, open(f"{out}.r0.csv") as b:
        ref_rows, rows = a.read().splitlines(), b.read().splitlines()
    assert rows[0] == ref_rows[0] and len(rows) == len(ref_rows)


@pytest.fixture(scope="module")
def v2_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2ref") / "ref"
    run("v2_parallel.py", out)
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_v2_trainer_data_parallel_equals_one_process(tmp_path, v2_reference, n):
    """paddle.trainer.SGD.train(distribute=True): 2 passes of a shuffled reader with a short
    last batch (on 4 ranks one rank has no sample of it) give the parameters, costs and
    error rates of one process (float32, 1e-6 of each array's largest value; costs 1e-6
    relative); every rank ends with the same parameters; only rank 0 ran the handler."""
    out = tmp_path / "dist"
    run("v2_parallel.py", out, n=n)
    assert_close(load(f"{v2_reference}.npz"), load(f"{out}.npz"), 1e-6, f"v2 on {n} ranks")
    first = load(f"{out}.rank0.npz")
    for r in range(1, n):
        theirs = load(f"{out}.rank{r}.npz")
        assert all(np.array_equal(first[k], theirs[k]) for k in first)
    ref_events, events = load_json(f"{v2_reference}.events.json"), load_json(
        f"{out}.events.json")
    assert len(events) == len(ref_events) == 2 * 6 + 2
    for want, got in zip(ref_events, events):
        assert got[:3 if got[0] == "iteration" else 2] == want[:3 if want[0] == "iteration"
                                                                else 2]
        if got[0] == "iteration":
            np.testing.assert_allclose(got[3], want[3], rtol=1e-6)
        else:  # the pass's error rates (counts), and the handler's test() alone on rank 0
            assert got[2] == pytest.approx(want[2], rel=1e-12)
            np.testing.assert_allclose(got[3], want[3], rtol=1e-6)
            assert got[4] == pytest.approx(want[4], rel=1e-12)
        if got[0] == "iteration":
            assert got[-1] == pytest.approx(want[-1], rel=1e-12)  # error rates: counts
    handlers = sorted(f for f in os.listdir(tmp_path) if ".handler." in f)
    assert handlers == ["dist.handler.rank0"]
    # test(distribute=True) and paddle.infer(distribute=True) after training: sharded, and
    # every rank has the whole result (infer's rows are in the npz compared above)
    want = load_json(f"{v2_reference}.test.rank0.json")
    for r in range(n):
        got = load_json(f"{out}.test.rank{r}.json")
        assert got[0] == pytest.approx(want[0], rel=1e-6)
        assert got[1] == pytest.approx(want[1], rel=1e-12)


def test_checkpoint_saved_on_two_ranks_resumes_on_four_and_alone(tmp_path):
    """Adam states and weights saved by 2 ranks after 2 epochs; 1 more epoch on 4 ranks,
    or alone, equals 3 epochs in one go."""
    straight, first = tmp_path / "straight", tmp_path / "first"
    run("resume.py", straight, "--epochs", 3)
    run("resume.py", first, "--epochs", 2, n=2)
    expected = load(f"{straight}.npz")
    for n in (4, None):
        out = tmp_path / f"resumed{n}"
        run("resume.py", out, "--start", f"{first}.ck.zip", "--epochs", 3, "--initial", 2,
            n=n)
        assert_close(expected, load(f"{out}.npz"), 1e-5, f"resumed on {n or 1} rank(s)")
