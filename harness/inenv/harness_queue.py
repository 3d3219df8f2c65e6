"""Claiming a cell of a queue that several processes draw from (``run.queue``): the
in-environment plugin as it takes the next case, the harness as it settles cells no process
can run. Stdlib only: put on PYTHONPATH inside the environment, never installed."""

from __future__ import annotations

import contextlib
import os


def claim(path: str, token: str) -> bool:
    """Make the claim file ``path`` holding ``token``; False if it exists (another drawer
    has the cell). Of several processes exactly one wins, and a claim is never seen without
    its token: the token is written to a file of this drawer's first, then hard-linked to
    ``path`` (``link`` fails where the name exists), so a process killed halfway leaves no
    claim that names nobody."""
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
