"""SINGA's experimental DistOpt steps on two ranks train the shipped digits to the accuracy
of one process training on the whole batches (within 1 point of the 359 test images)."""
import pytest

from .mpirun import load, needs_mpi, run

pytestmark = needs_mpi


@pytest.fixture(scope="module")
def single_accuracy(tmp_path_factory):
    out = tmp_path_factory.mktemp("variants") / "ref"
    run("variants.py", out)
    acc = float(load(f"{out}.npz")["accuracy"])
    assert acc > 0.93  # the reference itself learned the digits
    return acc


@pytest.mark.parametrize("method", ["plain", "half", "partial", "sparse_topk",
                                    "sparse_threshold"])
def test_variant_converges_like_one_process(tmp_path, single_accuracy, method):
    out = tmp_path / method
    run("variants.py", out, "--method", method, n=2)
    acc = float(load(f"{out}.npz")["accuracy"])
    assert abs(acc - single_accuracy) <= 0.01, (method, acc, single_accuracy)
