import os

import numpy as np
import pytest

import hl


def pytest_collection_modifyitems(config, items):
    if not hl.cuda_available():
        skip = pytest.mark.skip(reason="no CUDA device (or the CUDA backend is not built)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng():
    """A numpy generator seeded per test, so failures reproduce."""
    seed = int(os.environ.get("HL_TEST_SEED", "1234"))
    return np.random.default_rng(seed)
