import os
import signal
import time

import pytest
import yaml


def test_pass():
    assert yaml.safe_load("a: 1") == {"a": 1}


def test_fail():
    assert 1 == 2, "one is not two"


@pytest.mark.skip(reason="not on this backend")
def test_skip():
    pass


@pytest.mark.xfail(reason="known upstream")
def test_xfail():
    raise ValueError("still broken")


def test_broken_fixture(broken):
    pass


@pytest.mark.skipif(os.environ.get("SUITE_CRASH") != "1", reason="crash not asked for")
def test_segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


@pytest.mark.skipif(os.environ.get("SUITE_HANG") != "1", reason="hang not asked for")
def test_hang():
    time.sleep(600)


def test_after():
    assert True
