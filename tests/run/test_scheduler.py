"""Slot bookkeeping: one slot per task, and the CPU slots nothing else waits for go to a
suite that wants xdist workers."""

from __future__ import annotations

from pathlib import Path

from harness.matrix.load import parse_matrix
from harness.plan.cells import Cell, make_plan
from harness.run.scheduler import Scheduler, Task, make_slots
from tests.conftest import PY


def cells(tmp_path: Path) -> dict[str, Cell]:
    """A session cell of a suite that wants 4 workers, and two of a suite that wants none."""
    for name in ("wide", "narrow"):
        (tmp_path / name).mkdir()
    spec = parse_matrix(
        f"version: 1\nsuites:\n  wide: {{path: {tmp_path / 'wide'}, workers: 4}}\n"
        f"  narrow: {{path: {tmp_path / 'narrow'}}}\nenvironments:\n"
        f"  a: {{backend: host, python: '{PY}', suites: [wide, narrow]}}\n"
        f"  b: {{backend: host, python: '{PY}', suites: [narrow]}}\n",
        file="m.yaml", base=tmp_path)
    return {f"{c.env.name}:{c.case.case_id}": c for c in make_plan(spec, (), ("cpu",)).cells}


def test_a_suite_widens_only_over_slots_nothing_else_waits_for(tmp_path: Path) -> None:
    found = cells(tmp_path)
    wide, one, two = (Task(cells=(found[k],), run_id="r")
                      for k in ("a:wide", "a:narrow", "b:narrow"))
    busy = Scheduler(make_slots(3, []))
    busy.pending.extend([wide, one, two])
    assert [(s.name, t) for s, t in busy.assign()] == [("cpu0", wide), ("cpu1", one),
                                                       ("cpu2", two)]
    assert busy.width(wide) == 1  # three tasks, three slots: no worker more

    spare = Scheduler(make_slots(3, []))
    spare.pending.extend([wide, one])
    assert [t for _, t in spare.assign()] == [wide, one]
    assert (spare.width(wide), spare.width(one)) == (2, 1)  # the third slot, not four
    spare.pending.extend([two])
    assert spare.assign() == []  # every slot is held
    assert spare.complete(next(s for s, t in spare.slot_to_task.items() if t is wide)) is wide
    assert spare.width(wide) == 0  # both its slots are free again
    assert [(s.name, t) for s, t in spare.assign()] == [("cpu0", two)]
    assert spare.width(two) == 1  # a suite without workers takes one slot, spare or not
