"""Claiming a cell of a queue that several processes draw from (``run.queue``): the
in-environment plugin as it takes the next case, the harness as it settles cells no process
can run. Stdlib only: put on PYTHONPATH inside the environment, never installed."""

from __future__ import annotations

import os


def claim(path: str, token: str) -> bool:
    """Create the claim file ``path`` holding ``token``; False if it exists (another drawer
    has the cell). ``O_EXCL``: of several processes, exactly one wins."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, token.encode())
    finally:
        os.close(fd)
    return True
