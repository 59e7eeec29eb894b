import pytest

from hl.v2 import graph


@pytest.fixture(autouse=True)
def fresh_names():
    """Each test names its layers from __fc_layer_0__ on, as a fresh v2 process would."""
    graph._counters.clear()
    yield
