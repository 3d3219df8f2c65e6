"""What a killed harness left running: its process groups carry a ``HARNESS_GROUP`` token (owner
pid and start time, temporary folder), as do its cells' scratch folders; the next harness there
kills the groups whose owner is gone, by token (never by a bare pid), and removes the folders."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import psutil


def start_time(pid: int) -> str | None:
    """When ``pid`` started (hundredths of a second since the epoch); None if it is gone.
    With the pid, it names one process: a recycled pid starts later."""
    try:
        return str(round(psutil.Process(pid).create_time() * 100))
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _gone(pid: str, started: str) -> bool:
    """Whether process ``pid`` that started at ``started`` has ended ("0", unknown: never)."""
    return started != "0" and start_time(int(pid)) != started


def owner() -> str:
    """This process, as a token and a scratch folder name it: ``pid.start_time``."""
    me = os.getpid()
    return f"{me}.{_started(me)}"


@functools.cache
def _started(pid: int) -> str:
    """This process's start time, once (a forked child asks again: its pid differs)."""
    return start_time(pid) or "0"


@functools.cache
def _place() -> str:  # the temporary folder: harnesses that share it reap each other's groups
    return hashlib.sha256(tempfile.gettempdir().encode()).hexdigest()[:8]


TOKEN = re.compile(r"(\d+)\.(\d+)-([0-9a-f]{8})-[0-9a-f]{16}")


def new_token() -> str:
    return f"{owner()}-{_place()}-{secrets.token_hex(8)}"


def reap() -> dict[str, list[int]]:
    """Kill the groups whose owning harness is gone and sweep its scratch folders; the pids
    killed, by token."""
    if start_time(os.getpid()) is None:  # no /proc: whose a group is cannot be told
        return {}

    def orphan(token: str) -> bool:
        found = TOKEN.fullmatch(token)
        return found is not None and found[3] == _place() and _gone(found[1], found[2])

    killed = _kill(orphan)
    sweep_scratch()
    return killed


SCRATCH = re.compile(r"harness-cell-[0-9a-f]+-(\d+)\.(\d+)-")


def scratch_prefix(cell_id: str) -> str:
    """A cell's scratch folder's name: the cell, then its owner (``owner``)."""
    return f"harness-cell-{cell_id}-{owner()}-"


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders in ``root`` (the temporary folder) whose harness is gone."""
    root = Path(root or tempfile.gettempdir())
    swept: list[Path] = []
    if start_time(os.getpid()) is None:  # no /proc: whose folder it is cannot be told
        return swept
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            match = SCRATCH.match(entry.name)
            if match and entry.is_dir(follow_symlinks=False) and _gone(match[1], match[2]):
                shutil.rmtree(entry.path, ignore_errors=True)
                swept.append(Path(entry.path))
    return swept


def kill_members(token: str) -> list[int]:
    """SIGKILL every process of the group ``token``; the pids killed."""
    return _kill(token.__eq__).get(token, [])


def _kill(which: Callable[[str], bool]) -> dict[str, list[int]]:
    """SIGKILL every process whose ``HARNESS_GROUP`` token ``which`` accepts, whatever its group
    now (a daemon that called ``setsid`` keeps it), until none is left; the pids, by token."""
    killed: dict[str, set[int]] = {}
    for _ in range(5):  # one that forked meanwhile is found the next round
        found = {proc: token for proc in psutil.process_iter()
                 if proc.pid != os.getpid() and (token := _token(proc)) and which(token)}
        if not found:
            break
        for proc, token in found.items():
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.setdefault(token, set()).add(proc.pid)
        psutil.wait_procs(list(found), timeout=1)
    return {token: sorted(pids) for token, pids in killed.items()}


def _token(proc: psutil.Process) -> str:
    try:
        return str(proc.environ().get("HARNESS_GROUP", ""))
    except (psutil.Error, OSError):
        return ""
