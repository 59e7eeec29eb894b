import os

import numpy as np
import pytest

import hl


def pytest_collection_modifyitems(config, items):
    if not hl.cuda_available():  # HL_CUDA_EMULATE=1 makes one (docs/cuda.md)
        skip = pytest.mark.skip(reason=f"no CUDA device ({hl.cuda.unavailable_reason()}); "
                                       f"HL_CUDA_EMULATE=1 runs these on the CPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """In CI (HL_CI=1, set by .ci/run) a skipped test is a failure: CI installs every reference
    library (PyTorch, onnxruntime, Keras, mpi4py), so a test that skips there checked nothing.
    Only `gpu` tests may skip, on a machine with no CUDA backend to run them on."""
    if os.environ.get("HL_CI") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    bad = [r for r in skipped if "gpu" not in getattr(r, "keywords", {})]
    if bad:
        for r in bad:
            reason = r.longrepr[2] if isinstance(r.longrepr, tuple) else str(r.longrepr)
            reporter.write_line(f"CI: {r.nodeid} skipped ({reason}); nothing may skip in CI")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def rng():
    """A numpy generator seeded per test, so failures reproduce."""
    seed = int(os.environ.get("HL_TEST_SEED", "1234"))
    return np.random.default_rng(seed)
