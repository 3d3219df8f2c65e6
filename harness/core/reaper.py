"""Process groups the harness starts (cells, builds), recorded on the machine that runs them, so
that what a killed harness left behind is reaped by the next one.

Each group is started with ``HARNESS_GROUP=<token>`` in its environment (which its members
inherit) and gets a file in ``<cache>/procs/`` naming its group id, the token, and the harness
process that owns it (pid and start time, so a reused pid is never mistaken for it). When its
cell or build ends, every process of the group that carries the token is killed and the file
goes; a harness starting on this machine (a run, a resume, a Ray worker) does the same for the
groups whose owner is gone. Killing by group id and token, never by a bare number, means a
recycled pid or group id is never hit. Linux only (``/proc``); elsewhere nothing is recorded.

A cell's scratch folder (its events and log while it runs) is named after the harness process
that made it, pid and start time alike (``scratch_prefix``), and the reaping removes the
scratch folders whose maker is gone: a harness killed mid-cell leaves nothing in the
temporary folder either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields count from the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else None


def alive(pid: int, started: str | None) -> bool:
    return started is not None and start_time(pid) == started


class Registry:
    def __init__(self, cache_dir: Path) -> None:
        self.folder = cache_dir / "procs"
        self.owner = os.getpid()
        self.owner_started = start_time(self.owner)

    def add(self, pid: int, token: str, kind: str, what: str) -> Path | None:
        """Record the group led by ``pid`` (started in a session of its own, with
        ``HARNESS_GROUP=token`` in its environment)."""
        if self.owner_started is None:
            return None
        record = {"pgid": pid, "token": token, "kind": kind, "what": what[:300],
                  "owner": self.owner, "owner_started": self.owner_started,
                  "recorded_at": time.time()}
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{token}.json"
            path.write_text(json.dumps(record))
            return path
        return None

    def done(self, path: Path | None, pgid: int, token: str) -> None:
        """The cell or build ended: kill what is left of its group, forget it."""
        kill_members(pgid, token)
        if path is not None:
            path.unlink(missing_ok=True)

    def reap(self) -> list[dict[str, Any]]:
        """Kill the groups whose owning harness is gone; what was killed."""
        reaped = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                continue
            if alive(record["owner"], record["owner_started"]):
                continue  # another harness, still running, owns it
            record["killed"] = kill_members(int(record["pgid"]), str(record["token"]))
            path.unlink(missing_ok=True)
            reaped.append(record)
        sweep_scratch()
        return reaped


SCRATCH = re.compile(r"harness-cell-[0-9a-f]+-(\d+)\.(\d+)-")


def scratch_prefix(cell_id: str) -> str:
    """The name a cell's scratch folder starts with: the cell, then this process (pid and
    start time, so that a recycled pid never passes for it)."""
    me = os.getpid()
    return f"harness-cell-{cell_id}-{me}.{_started(me)}-"


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove the cells' scratch folders in ``root`` (the temporary folder) whose harness is
    gone; the ones removed."""
    root = Path(root or tempfile.gettempdir())
    swept: list[Path] = []
    if start_time(os.getpid()) is None:  # no /proc: whose folder it is cannot be told
        return swept
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            match = SCRATCH.match(entry.name)
            if match and entry.is_dir(follow_symlinks=False) and not alive(
                    int(match[1]), match[2]):
                shutil.rmtree(entry.path, ignore_errors=True)
                swept.append(Path(entry.path))
    return swept


_STARTED: dict[int, str] = {}


def _started(pid: int) -> str:
    """This process's start time, once (a forked child asks again: its pid differs)."""
    if pid not in _STARTED:
        _STARTED[pid] = start_time(pid) or "0"
    return _STARTED[pid]


def new_token() -> str:
    return secrets.token_hex(8)


def members(pgid: int, token: str) -> list[int]:
    """Processes of group ``pgid`` that carry ``HARNESS_GROUP=token``."""
    marker = f"HARNESS_GROUP={token}".encode()
    found = []
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return found


def kill_members(pgid: int, token: str) -> list[int]:
    """SIGKILL the group's processes that carry the token (the leader may be gone already;
    what it started in the background is not). The pids it killed."""
    killed = []
    for pid in members(pgid, token):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
