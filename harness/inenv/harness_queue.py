"""Claiming a cell of a queue several processes draw from (``run.queue``), in environments
(stdlib only) and in the harness."""

from __future__ import annotations

import contextlib
import os


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
