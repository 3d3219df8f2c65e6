"""Every command the README and the docs show is a command the harness takes: each `harness ...`
line of a ```bash/```sh block is parsed by the real parser, the cheap ones are run for real in a
temporary folder, every `nox -s` session named exists, and every relative link resolves."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser
from tests.conftest import DATA, ROOT, write_matrix

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^ *```(?:bash|sh)\n(.*?)^ *```", re.S | re.M)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

#: Commands shown but only parsed here, by subcommand: why they cannot run in a test.
PARSED_ONLY = {
    "run": "builds torch environments (minutes to hours) or needs a GPU, Ray or a wheel folder",
    "lock": "asks the package index for every release query of the matrix (network)",
    "bisect": "builds an environment per probed release",
    "wheelhouse": "downloads every wheel the environments need",
    "merge": "needs the shard run folders of a CI night",
    "images": "debootstraps a base image (root, Docker)",
    "envs build": "compiles TransformerEngine and flash-attn from source (hours)",
}
#: Commands run for real against the repository's matrix and a small real run.
RUN = {"plan", "cases", "doctor", "history", "report", "baseline", "envs"}


def _named(command: str) -> str:
    """The subcommand a shown command runs: `envs build` apart from the cheap `envs` ones."""
    words = shlex.split(command)[1:3]
    return " ".join(words) if words == ["envs", "build"] else words[0]


def _snippets(kind: str) -> list[tuple[str, str]]:
    """(page:line, the command's words) for each `kind ...` command in a shell block."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in _BLOCK.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            for offset, line in enumerate(block.group(1).splitlines()):
                words = shlex.split(line, comments=True)
                for part in _split(words):
                    while part and _ASSIGNMENT.match(part[0]):
                        part = part[1:]  # VAR=value harness ...
                    if part and part[0] == kind:
                        found.append((f"{page.relative_to(ROOT)}:{first + offset}",
                                      shlex.join(part)))
    return found


def _split(words: list[str]) -> list[list[str]]:
    """A line's commands, cut at &&, ||, | and ;."""
    parts: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", "|", ";"):
            parts.append([])
        else:
            parts[-1].append(word)
    return parts


HARNESS = _snippets("harness")
NOX = _snippets("nox")


def test_the_pages_show_commands_at_all() -> None:
    """The extraction itself: a broken pattern would make every check below vacuous."""
    assert len(HARNESS) >= 20 and len(NOX) >= 3
    assert any(where.startswith("README.md") for where, _ in HARNESS)


@pytest.mark.parametrize(("where", "command"), HARNESS, ids=[w for w, _ in HARNESS])
def test_each_harness_command_shown_parses(where: str, command: str) -> None:
    args = shlex.split(command)[1:]
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit as exc:
        assert exc.code == 0 and "--help" in args, f"{where}: {command!r} does not parse"
        return
    assert parsed.command in RUN or parsed.command in PARSED_ONLY, (
        f"{where}: say whether `harness {parsed.command}` runs here or why not")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that looks like a checkout to the commands (the repository's matrix, lock and
    cases) and whose reports hold one small real run, `merged` (host backend, no torch)."""
    tmp = tmp_path_factory.mktemp("docs")
    for name in ("matrix.yaml", "matrix.lock.json", "cases", "matrices"):
        (tmp / name).symlink_to(ROOT / name)
    small = write_matrix(tmp / "small.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "environments:\n  host: {backend: host, python: '@PY@'}\n"))
    done = _harness(tmp, "run", "-m", str(small), "-k", "test_behaviour.py::test_p*",
                    "--run-id", "merged")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return tmp


def _harness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


CHEAP = [(where, command) for where, command in HARNESS
         if _named(command) in RUN or "--help" in shlex.split(command)]


@pytest.mark.parametrize(("where", "command"), CHEAP, ids=[w for w, _ in CHEAP])
def test_each_cheap_command_shown_runs(folder: Path, where: str, command: str) -> None:
    done = _harness(folder, *shlex.split(command)[1:])
    assert done.returncode == 0, f"{where}: {command}\n{done.stdout[-2000:]}{done.stderr}"
    assert "Traceback" not in done.stderr


def test_some_commands_run_for_real_and_the_rest_say_why_not() -> None:
    ran = {shlex.split(command)[1] for _, command in CHEAP}
    assert {"plan", "cases", "history", "report"} <= ran
    shown = {_named(command) for _, command in HARNESS}
    assert set(PARSED_ONLY) <= shown, "a reason for a command no page shows any more"


def _sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d).startswith("nox.session") for d in node.decorator_list)}


@pytest.mark.parametrize(("where", "command"), NOX, ids=[w for w, _ in NOX])
def test_each_nox_session_shown_exists(where: str, command: str) -> None:
    words = shlex.split(command)
    assert "-s" in words, f"{where}: {command}"
    named = words[words.index("-s") + 1:]
    named = named[:named.index("--")] if "--" in named else named
    assert named and set(named) <= _sessions(), f"{where}: {command}: no such nox session"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation out, spaces to -."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.relative_to(ROOT)}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.relative_to(ROOT)}: no #{anchor}"


def test_the_readme_stays_a_front_door() -> None:
    """What a newcomer needs on a few screens (issue 50: at most 250 lines); the rest is in docs/
    pages the README links to."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= 250
    for guide in ("nightly-ci", "bumps-and-bisect", "your-suite", "gpu-runners", "matrix",
                  "cases", "cli"):
        assert f"](docs/{guide}.md)" in readme, guide
