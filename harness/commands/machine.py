"""Commands about this machine and the cases: doctor, cases."""

from __future__ import annotations

import argparse

from harness.plan.hardware import describe, probe_machine
from harness.planning import RunOptions, RunState, load_spec


def cmd_doctor(args: argparse.Namespace) -> int:
    print(describe(probe_machine()))
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    for case in load_spec(RunState(options=RunOptions(matrix=args.matrix))).cases:
        gpu = " [gpu]" if case.needs_gpu else ""
        sigs = f"  reproduces: {', '.join(case.signatures)}" if case.signatures else ""
        print(f"{case.label}{gpu}{sigs}")
    return 0
