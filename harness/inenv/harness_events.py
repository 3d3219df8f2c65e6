"""The events file the in-environment plugins write and the harness reads as it grows
(``run.watch``). Stdlib only: put on PYTHONPATH inside the environment, never installed."""

from __future__ import annotations

import json
from typing import Any


class Events:
    """One JSON object per line, flushed to the kernel at once (a kill -9 loses nothing); not
    fsynced: the harness reading it runs on the same machine."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives for the session

    def write(self, **event: Any) -> None:
        self.fh.write(json.dumps(event, default=str) + "\n")
        self.fh.flush()
