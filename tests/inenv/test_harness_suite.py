"""The suite plugin, run by pytester as a suite's session runs it (with xdist and without)."""

from __future__ import annotations

import json

import pytest

from harness.core.paths import INENV_DIR

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_reason_is_pytests_message_not_the_workers_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
        ) -> None:
    monkeypatch.setenv("PYTHONPATH", str(INENV_DIR))  # xdist's workers import the plugin
    pytester.makepyfile(test_s="""
import pytest

@pytest.mark.xfail(strict=True, reason="fixed upstream")
def test_strict():
    pass
""")
    events = pytester.path / "events.jsonl"
    pytester.runpytest_subprocess("-p", "harness_suite", f"--harness-suite-events={events}",
                                  *xdist)
    finish = [e for e in map(json.loads, events.read_text().splitlines())
              if e["event"] == "finish"]
    assert [e["reason"] for e in finish] == ["[XPASS(strict)] fixed upstream"]
