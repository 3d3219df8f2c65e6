"""The package's shape, checked: the import-linter contracts hold, and they can fail."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
needs_linter = pytest.mark.skipif(not Path(LINT_IMPORTS).exists(),
                                  reason="import-linter is not installed (pip install .[test])")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, env=env, capture_output=True,
                          text=True, check=False, timeout=300)


@needs_linter
def test_the_layer_contracts_hold() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@needs_linter
@pytest.mark.parametrize(("module", "back_import"), [
    # the bottom layer reaching the top: a layer contract breaks
    ("harness/core/errors.py", "import harness.workflow"),
    # two records modules importing each other: the records layers and the cycle check break
    ("harness/records/codec.py", "import harness.records.store"),
])
def test_a_back_import_breaks_a_contract(tmp_path: Path, module: str, back_import: str) -> None:
    shutil.copytree(ROOT / "harness", tmp_path / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{back_import}  # noqa\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout


def _local_harness_imports(path: Path) -> list[str]:
    """``from harness...`` / ``import harness...`` statements inside function bodies."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            names = ([inner.module or ""] if isinstance(inner, ast.ImportFrom)
                     else [a.name for a in inner.names] if isinstance(inner, ast.Import) else [])
            found += [f"{path.relative_to(ROOT)}:{inner.lineno}: {name}"  # type: ignore[attr-defined]
                      for name in names if name == "harness" or name.startswith("harness.")]
    return found


def test_no_harness_import_hides_inside_a_function() -> None:
    # An import inside a function is how a cycle hides from the linter; the one lazy
    # loading of the package's own code is the CLI's table of command modules, by name.
    found = [hit for path in sorted((ROOT / "harness").rglob("*.py"))
             if "inenv" not in path.parts for hit in _local_harness_imports(path)]
    assert found == []


def test_no_module_is_over_600_lines() -> None:
    """Small modules with one job each: a module past 600 lines is split (store.py reached 629)."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "harness").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}, long
