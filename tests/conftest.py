from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
# The in-env plugin is imported by its own name inside environments; do the same here.
sys.path.insert(0, str(ROOT / "harness" / "inenv"))

# The default limits, whatever the shell that started the suite raised them to (a fleet's
# benchmark exports HARNESS_MAX_CELLS=200000): the refusals' tests count against them.
os.environ.pop("HARNESS_MAX_CELLS", None)

#: Hypothesis's examples per property are scaled by HARNESS_TEST_EXAMPLES: 1 (all of them) in
#: `nox -s tests`, a fraction in `nox -s fast`, the quick lane a developer runs between edits.
EXAMPLES = float(os.environ.get("HARNESS_TEST_EXAMPLES", "1"))


def examples(n: int) -> int:
    return max(10, round(n * EXAMPLES))


def _check_every_report() -> None:
    """Every report the suite writes in its own process is checked against its record
    (harness.report.check; a `harness` subprocess's, by the tests that pass it --check): a
    contradiction fails the test that wrote it. Not where the suites under tests/data run
    bare in environments of their own, without the harness, and load this file too."""
    try:
        from harness.report.check import check_report
        from harness.report.writers import register
    except ImportError:  # the harness's dependencies are not installed there
        return

    def checked(report: Any, out_dir: Path) -> dict[str, Path]:
        problems = check_report(report)
        if problems:
            raise AssertionError("the report contradicts its record:\n" + "\n".join(problems))
        return {}

    register("check", checked)


PY = f"{sys.version_info.major}.{sys.version_info.minor}"
#: Upstream packages CI cannot download (../shared beside the clone, as CI has it).
WHEELHOUSE = ROOT.parent / "shared" / "wheelhouse"
needs_wheelhouse = pytest.mark.skipif(
    not WHEELHOUSE.is_dir(), reason=f"needs the shared wheelhouse at {WHEELHOUSE}")


@pytest.fixture
def data() -> Path:
    return DATA


def report_dir(reports: Path) -> Path:
    """Where the newest run under ``reports`` wrote its report (``<run>/report``)."""
    runs = sorted((reports / "runs").glob("*/report"), key=lambda p: p.stat().st_mtime)
    assert runs, f"no report under {reports / 'runs'}"
    return runs[-1]


def imported(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` importing ``module`` brings in, in a fresh interpreter (what a
    command's start-up pays for)."""
    code = (f"import sys, json; import {module}; "
            f"print(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    found: list[str] = json.loads(done.stdout)
    return found


def write_matrix(path: Path, body: str) -> Path:
    path.write_text(body.replace("@PY@", PY))
    return path


REPORT_VAR = "HARNESS_TEST_REPORT"
_CREATED: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    _check_every_report()
    # The suite starts hundreds of interpreters (workers, `harness` processes) on the same
    # sources: they keep their bytecode and rewritten asserts, whatever the shell exports.
    os.environ["PYTHONDONTWRITEBYTECODE"] = ""  # empty: unset, to Python
    # Set once, in the main process, before pytest-xdist starts its workers (they inherit it).
    if not os.environ.get(REPORT_VAR):
        fd, path = tempfile.mkstemp(prefix="harness-test-report-", suffix=".txt")
        os.close(fd)
        os.environ[REPORT_VAR] = path
        _CREATED.append(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _CREATED:  # the main process made it; it leaves nothing behind
        Path(path).unlink(missing_ok=True)


def report_line(text: str) -> None:
    """A line for the end of the test log: what a test ran for real (a reproduction)."""
    with open(os.environ[REPORT_VAR], "a", encoding="utf-8") as fh:
        fh.write(text.replace("\n", " ") + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    path = Path(os.environ.get(REPORT_VAR, ""))
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    if lines:
        terminalreporter.section("what ran for real")
        for line in lines:
            terminalreporter.line(line)


def ctrl_c_reaches() -> None:
    """``preexec_fn`` for a harness a test interrupts: SIGINT back to its default, which
    Python turns into KeyboardInterrupt. A suite started in the background of a
    non-interactive shell (``cmd &``) inherits SIGINT ignored, and so would the harness."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def record_lines(run_dir: Path) -> list[dict[str, Any]]:
    """Every attempt of a run's results.jsonl as a dict with every field (a line leaves out
    the fields at their default), read as the store reads it."""
    from harness.records.store import RunStore

    return [r.to_dict() for r in RunStore(run_dir).attempts()]


@contextlib.contextmanager
def served(folder: Path, handler: type[SimpleHTTPRequestHandler] = SimpleHTTPRequestHandler
           ) -> Iterator[str]:
    """``folder`` over http on a loopback port, by ``handler``: its base URL, with a slash."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=folder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
