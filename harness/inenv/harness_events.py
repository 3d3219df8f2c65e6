"""What the in-environment plugins share with the harness (stdlib only, put on PYTHONPATH
there): the events file, a queue's claims (``run.queue``) and the node ids the record keeps."""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest


class Events:
    """One JSON object per line, flushed to the kernel at once (a kill -9 loses nothing); not
    fsynced: the harness reading it runs on the same machine."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives for the session

    def write(self, **event: Any) -> None:
        self.fh.write(json.dumps(event, default=str) + "\n")
        self.fh.flush()


def claim(path: str, token: str) -> bool:
    """Make the claim file ``path`` holding ``token`` by a hard link (exactly one wins, none
    is seen without its token); False if another drawer has it."""
    folder, name = os.path.split(path)
    mine = os.path.join(folder, f".{name}.{token}")
    with open(mine, "w", encoding="utf-8") as fh:
        fh.write(token)
    try:
        os.link(mine, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(mine)
    return True


def stable_nodeid(nodeid: str) -> str:
    """A node id as the record keeps it, the same on every machine: an installed package's
    tests (``--pyargs``) are named from the package, not from the environment's path."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in nodeid:
            return nodeid.split(marker, 1)[1]
    return nodeid


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return str(reason).removeprefix("Skipped: ")
