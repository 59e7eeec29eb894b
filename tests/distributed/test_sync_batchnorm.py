"""SyncBatchNorm: N ranks, each on its shard of every global batch, equal one process with
plain batch norm on the union batch (parameters and running statistics after 4 DistOpt steps
of a CNN with BatchNorm2d and BatchNorm1d, float64, 1e-9 of each array's largest value);
plain batch norm on the same ranks does not (the check can fail). Alone it is BatchNorm."""
import numpy as np
import pytest

import hl
from hl import errors

from .mpirun import assert_close, load, needs_mpi, run


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("bnref") / "ref"
    run("sync_bn.py", out, "--sync", 0)
    return load(f"{out}.npz")


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_sync_batchnorm_on_n_ranks_equals_one_process_on_the_union(tmp_path, reference, n):
    run("sync_bn.py", tmp_path / "sync", n=n)
    assert_close(reference, load(f"{tmp_path / 'sync'}.npz"), 1e-9, f"SyncBatchNorm, {n} ranks")
    first = load(f"{tmp_path / 'sync'}.rank0.npz")
    for r in range(1, n):  # running statistics too are the same everywhere
        theirs = load(f"{tmp_path / 'sync'}.rank{r}.npz")
        assert all(np.array_equal(first[k], theirs[k]) for k in first)


@needs_mpi
def test_plain_batchnorm_on_two_ranks_differs_from_one_process(tmp_path, reference):
    run("sync_bn.py", tmp_path / "plain", "--sync", 0, n=2)
    with pytest.raises(AssertionError, match="differs by"):
        assert_close(reference, load(f"{tmp_path / 'plain'}.npz"), 1e-3, "plain batch norm")


@needs_mpi
def test_fit_refuses_a_last_batch_that_leaves_a_rank_without_samples(tmp_path):
    proc, _ = run("sync_bn.py", tmp_path / "fit", "--fit_rows", 33, n=2)  # 33 = 2 x 16 + 1
    for r in (0, 1):
        assert (f"rank {r}: fit: the model has SyncBatchNorm layers" in proc.stdout
                and "has 1 rows for 2 ranks" in proc.stdout), proc.stdout


def test_alone_it_is_batchnorm_and_convert_keeps_the_tensors():
    rng = np.random.default_rng(0)
    x = hl.tensor(rng.normal(size=(6, 3, 4, 4)))
    bn = hl.layers.BatchNorm2d(momentum=0.2, eps=1e-3)
    bn.train()
    want = bn(x).numpy()
    scale, running = bn.scale, bn.running_mean
    sync = hl.distributed.SyncBatchNorm.convert_sync_batchnorm(bn)
    assert type(sync).__name__ == "SyncBatchNorm"
    assert sync.scale is scale and sync.running_mean is running  # the same tensors
    assert (sync.momentum, sync.eps) == (0.2, 1e-3)
    sync.train()
    np.testing.assert_allclose(sync(x).numpy(), want, rtol=1e-12)
    with pytest.raises(errors.ShapeError, match="SyncBatchNorm"):
        sync(hl.tensor(rng.normal(size=(2, 5, 4, 4))))
