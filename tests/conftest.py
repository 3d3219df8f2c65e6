from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
# The in-env plugin is imported by its own name inside environments; do the same here.
sys.path.insert(0, str(ROOT / "harness" / "inenv"))

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
#: Upstream packages CI cannot download (../shared beside the clone, as CI has it).
WHEELHOUSE = ROOT.parent / "shared" / "wheelhouse"
needs_wheelhouse = pytest.mark.skipif(
    not WHEELHOUSE.is_dir(), reason=f"needs the shared wheelhouse at {WHEELHOUSE}")


@pytest.fixture
def data() -> Path:
    return DATA


def write_matrix(path: Path, body: str) -> Path:
    path.write_text(body.replace("@PY@", PY))
    return path
