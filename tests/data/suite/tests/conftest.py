import os

import pytest


def pytest_configure(config):
    # A suite's conftest that refuses to run without its variable (einops' does the same).
    if os.environ.get("SUITE_BACKENDS") is None:
        raise pytest.UsageError("SUITE_BACKENDS is not set")


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")
