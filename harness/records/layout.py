"""A run folder's layout: the names of what it holds, and how runs are named."""

from __future__ import annotations

import re
import secrets
import time

RESULTS = "results.jsonl"
META = "run.json"
CASES = "cases.json"
PLAN = "plan.json"
FULL_PLAN = "full_plan.json"
# run.json's "format": 2 added logical keys, case metadata, attempts, relative logs; 3 moves
# the plan out of run.json (a large plan is tens of MB: reading a run's metadata must not
# parse it); 4 writes each line's fingerprint and machine once, to
# shared.jsonl.
FORMAT = 4
SHARED = "shared.jsonl"
#: The fields a line may hold by reference (the hash of a value in shared.jsonl).
BY_REFERENCE = ("fingerprint", "hardware")
#: What a run was for (run.json ``kind``): a scheduled run of the matrix, a bisect's probe, a
#: ``--set`` bump. Records written before it read as nightly.
KINDS = ("nightly", "trial", "bump")
NIGHTLY = "nightly"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
