"""A running process's events file, read as it grows: whole lines at once, what is no event
left out, a line being written left for the next read."""

from __future__ import annotations

from pathlib import Path

from harness.run.watch import Watch


def finished(watch: Watch) -> list[tuple[str, float]]:
    """The tests whose end the last read found, with when they ended."""
    return [(e["nodeid"], e["time"]) for e in watch.read() if e["event"] == "finish"]


def test_events_are_read_whole_lines_at_a_time_and_what_is_no_event_is_left_out(
        tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event": "start", "nodeid": "t.py::a", "time": 1.0}\n'
                     b'{"event": "finish", "nodeid": "t.py::a", "time": 2.0, "d": NaN}\n'
                     b"not json\n5\n\n"
                     b'{"event": "finish", "nodeid": "t.py::b", "time": 3.0}\n'
                     b'{"event": "fin')  # being written
    watch = Watch(path, timeout=60)
    assert finished(watch) == [("t.py::a", 2.0), ("t.py::b", 3.0)]
    assert [e["event"] for e in watch.events] == ["start", "finish", "finish"]
    with open(path, "ab") as fh:
        fh.write(b'ish", "nodeid": "t.py::c", "time": 4.0}\n')
    assert finished(watch) == [("t.py::c", 4.0)]
    assert watch.finished == {"t.py::a", "t.py::b", "t.py::c"} and not watch.running
    # Many lines of plain events: one decode, the same events.
    lines = b"".join(b'{"event": "finish", "nodeid": "t.py::n%d", "time": %d}\n' % (i, i)
                     for i in range(3000))
    with open(path, "ab") as fh:
        fh.write(lines)
    assert finished(watch) == [(f"t.py::n{i}", i) for i in range(3000)]
