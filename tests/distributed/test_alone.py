"""hl.distributed without mpiexec: a script written for one process runs unchanged, and
DistOpt is exactly the optimiser it wraps; bad arguments are hl errors."""
import os
import pickle
import sys

import numpy as np
import pytest

import hl
from hl import errors
from hl.distributed import launch


def _train(make_opt, method="backward_and_update", steps=4, **kw):
    hl.manual_seed(0)
    rng = np.random.default_rng(0)
    x = hl.tensor(rng.standard_normal((16, 5)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 3, 16))
    layer = hl.layers.Linear(3)
    layer(x)
    opt = make_opt()
    for _ in range(steps):
        loss = hl.losses.SoftmaxCrossEntropy()(layer(x), y)
        getattr(opt, method)(loss, **kw)
    return {k: v.numpy().copy() for k, v in layer.get_params().items()}, opt


@pytest.mark.parametrize("method", ["backward_and_update", "backward_and_update_half",
                                    "backward_and_partial_update",
                                    "backward_and_sparse_update"])
def test_distopt_alone_is_the_wrapped_optimiser(method):
    ref, _ = _train(lambda: hl.opt.SGD(lr=0.1, momentum=0.9))
    got, opt = _train(lambda: hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9)), method)
    for k in ref:
        np.testing.assert_array_equal(ref[k], got[k])
    assert opt.step_count == 4 and opt.world_size == 1 and opt.global_rank == 0


def test_distopt_has_singas_communicator_and_takes_opt_of_loss():
    # SINGA's train_cnn.py knows it runs distributed by hasattr(opt, "communicator"), and
    # SINGA's models call the optimiser on the loss: opt(loss), whose second positional
    # argument in DistOpt is the bucket threshold, not dy
    opt = hl.opt.DistOpt(hl.opt.SGD(lr=0.1))
    assert hasattr(opt, "communicator") and opt.communicator is None  # alone: no group
    ref, _ = _train(lambda: hl.opt.SGD(lr=0.1, momentum=0.9))
    got, _ = _train(lambda: hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9)), "__call__")
    for k in ref:
        np.testing.assert_array_equal(ref[k], got[k])


def test_distopt_states_and_pickle_are_the_wrapped_optimisers():
    _, opt = _train(lambda: hl.opt.DistOpt(hl.opt.Adam(lr=1e-2)))
    assert isinstance(opt, hl.opt.Optimizer) and opt.name == "Adam"
    states, inner = opt.get_states(), opt.opt.get_states()
    assert states["step"] == 4 and sorted(states) == sorted(inner)
    back = pickle.loads(pickle.dumps(opt))
    assert type(back) is hl.opt.Adam and back.step_count == 4
    opt.lr = 0.5  # Keras callbacks set the learning rate through the wrapper
    assert opt.opt.lr == 0.5


def test_distopt_bad_arguments():
    with pytest.raises(errors.UnsupportedError, match="starts its NCCL group through MPI"):
        hl.opt.DistOpt(hl.opt.SGD(), nccl_id=object())
    with pytest.raises(errors.ValueError, match="must be an hl.opt optimiser"):
        hl.opt.DistOpt("sgd")
    with pytest.raises(errors.ValueError, match="buffSize"):
        hl.opt.DistOpt(hl.opt.SGD(), buffSize=0)
    with pytest.raises(errors.ValueError, match="spars"):
        _train(lambda: hl.opt.DistOpt(hl.opt.SGD()), "backward_and_sparse_update",
               spars=2.0, topK=True)


def test_fit_distribute_alone_is_plain_fit():
    def fit(**kw):
        hl.manual_seed(1)
        rng = np.random.default_rng(1)
        x = rng.standard_normal((50, 4)).astype(np.float32)
        y = rng.integers(0, 2, 50)
        m = hl.Sequential(hl.layers.Linear(8), hl.layers.ReLU(), hl.layers.Linear(2))
        m.compile(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"])
        h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, **kw)
        return h.history, {k: v.numpy().copy() for k, v in m.get_params().items()}
    h1, p1 = fit()
    h2, p2 = fit(distribute=True)
    assert h1 == h2 and all(np.array_equal(p1[k], p2[k]) for k in p1)
    with pytest.raises(errors.ValueError, match="distribute must be True, False or None"):
        fit(distribute="yes")


def test_keras_distribution_names():
    dp = hl.distribution.DataParallel()
    assert dp.devices == ["cpu:0"] and hl.distribution.list_devices() == ["cpu:0"]
    hl.distribution.set_distribution(dp)
    try:
        assert hl.distribution.distribution() is dp
    finally:
        hl.distribution.set_distribution(None)
    with pytest.raises(errors.ValueError, match="all the ranks"):
        hl.distribution.DataParallel(devices=["cpu:0", "cpu:1"])
    with pytest.raises(errors.ValueError, match="DataParallel or None"):
        hl.distribution.set_distribution("data_parallel")
    with pytest.raises(errors.UnsupportedError, match="whatever device each rank"):
        hl.distribution.list_devices("gpu")


def test_launcher_command(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cmd, env = launch.command(["-n", "2", "--timeout", "9", "train.py", "--epochs", "3"],
                              env={})
    assert cmd[1:3] == ["-n", "2"] and cmd[-3:] == ["train.py", "--epochs", "3"]
    if "-disable-auto-cleanup" in cmd and sys.platform.startswith("linux"):  # MPICH
        assert cmd[-4].endswith(os.path.join("hl", "distributed", "guard.py"))
    assert env["HL_DIST_TIMEOUT"] == "9.0"
    assert int(env["OMP_NUM_THREADS"]) >= 1
    cmd, _ = launch.command(["-n", "4", "--hosts", "a,b", "--iface", "eth0", "t.py"], env={})
    assert "a,b" in cmd and "eth0" in cmd


def test_launcher_lets_open_mpi_run_as_root(monkeypatch):
    """Open MPI's mpiexec refuses root unless told (seen in a GPU machine's container): the
    launcher tells it when it runs as root and the user has not decided; MPICH gets nothing."""
    monkeypatch.setattr(launch, "find_mpiexec", lambda: "mpiexec")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    consent = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
    monkeypatch.setattr(launch, "_is_mpich", lambda _: False)
    _, env = launch.command(["-n", "2", "t.py"], env={})
    assert all(env[v] == "1" for v in consent)
    _, env = launch.command(["-n", "2", "t.py"], env={"OMPI_ALLOW_RUN_AS_ROOT": "0"})
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "0"  # the user's choice stands
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    _, env = launch.command(["-n", "2", "t.py"], env={})
    assert not any(v in env for v in consent)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(launch, "_is_mpich", lambda _: True)
    _, env = launch.command(["-n", "2", "t.py"], env={})
    assert not any(v in env for v in consent)


def test_timeout_must_be_positive(monkeypatch):
    from hl.distributed import world
    monkeypatch.setenv("HL_DIST_TIMEOUT", "-3")
    with pytest.raises(errors.ValueError, match="HL_DIST_TIMEOUT"):
        world.timeout_from_env()


def test_sync_batchnorm_is_also_a_layer_as_in_torch_nn():
    """PyTorch keeps SyncBatchNorm in torch.nn: hl.layers has it too (the same class; alone
    it is plain batch norm: the output equals BatchNorm2d's with the same parameters)."""
    from hl.layers import SyncBatchNorm
    assert SyncBatchNorm is hl.distributed.SyncBatchNorm is hl.layers.SyncBatchNorm
    assert "SyncBatchNorm" in hl.layers.__all__
    x = hl.tensor(np.random.default_rng(0).standard_normal((4, 3, 5, 5)).astype(np.float32))
    sync, plain = SyncBatchNorm(), hl.layers.BatchNorm2d()
    np.testing.assert_allclose(sync(x).numpy(), plain(x).numpy(), rtol=1e-6, atol=1e-6)


def test_the_nccl_choice_is_checked(monkeypatch):
    """init(nccl=...) takes True, False or None; HL_DIST_NCCL 0, 1 or auto (nccl.py)."""
    from hl.distributed import nccl
    with pytest.raises(errors.ValueError, match="nccl must be True, False or None"):
        hl.distributed.init(nccl="yes")
    for raw, want in (("0", False), ("1", True), ("auto", None), ("", None)):
        monkeypatch.setenv("HL_DIST_NCCL", raw)
        assert nccl.setting(None) is want
    monkeypatch.setenv("HL_DIST_NCCL", "nccl")
    with pytest.raises(errors.ValueError, match="HL_DIST_NCCL must be 0"):
        nccl.setting(None)
    assert hl.distributed.backend() is None  # alone: nothing is reduced
