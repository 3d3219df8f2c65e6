"""Process groups the harness starts (cells, builds), recorded per machine so that the next
harness reaps what a killed one left: its groups (killed by their ``HARNESS_GROUP`` token, never by
a bare pid) and its cells' scratch folders."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil


def start_time(pid: int) -> str | None:
    """When ``pid`` started (hundredths of a second since the epoch); None if it is gone.
    With the pid, it names one process: a recycled pid starts later."""
    try:
        return str(round(psutil.Process(pid).create_time() * 100))
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def alive(pid: int, started: str | None) -> bool:
    return started is not None and start_time(pid) == started


class Registry:
    def __init__(self, cache_dir: Path) -> None:
        self.folder = cache_dir / "procs"
        self.owner = os.getpid()
        self.owner_started = start_time(self.owner)

    def add(self, pid: int, token: str, kind: str, what: str) -> Path | None:
        """Record the group led by ``pid`` (its members carry ``HARNESS_GROUP=token``)."""
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

    def done(self, path: Path | None, token: str) -> None:
        """The cell or build ended: kill what is left of its group, forget it."""
        kill_members(token)
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
            record["killed"] = kill_members(str(record["token"]))
            path.unlink(missing_ok=True)
            reaped.append(record)
        sweep_scratch()
        return reaped


SCRATCH = re.compile(r"harness-cell-[0-9a-f]+-(\d+)\.(\d+)-")


def scratch_prefix(cell_id: str) -> str:
    """A cell's scratch folder's name: the cell, then this process's pid and start time."""
    me = os.getpid()
    return f"harness-cell-{cell_id}-{me}.{_started(me)}-"


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders in ``root`` (the temporary folder) whose harness is gone."""
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


@functools.cache
def _started(pid: int) -> str:
    """This process's start time, once (a forked child asks again: its pid differs)."""
    return start_time(pid) or "0"


def new_token() -> str:
    return secrets.token_hex(8)


def kill_members(token: str) -> list[int]:
    """SIGKILL every process with ``HARNESS_GROUP=token`` in its environment, whatever its
    group now (a daemon that called ``setsid`` keeps it), until none is left; the pids killed."""
    killed: set[int] = set()
    for _ in range(5):  # one that forked meanwhile is found the next round
        found = [p for p in psutil.process_iter() if p.pid != os.getpid() and _carries(p, token)]
        if not found:
            break
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.add(proc.pid)
        psutil.wait_procs(found, timeout=1)
    return sorted(killed)


def _carries(proc: psutil.Process, token: str) -> bool:
    try:
        return proc.environ().get("HARNESS_GROUP") == token
    except (psutil.Error, OSError):
        return False
