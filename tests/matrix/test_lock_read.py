"""A damaged or foreign lock is refused in one line that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UsageError
from harness.matrix.releases import LOCK_FORMAT, read_lock


@pytest.mark.parametrize(("text", "why"), [
    ("{not json", "Expecting property name"),
    ('{"format": "another tool 3"}', "format 'another tool 3'"),
    ("[1, 2]", "format None"),
    (f'{{"format": "{LOCK_FORMAT}"}}', "'resolutions'"),
    (f'{{"format": "{LOCK_FORMAT}", "resolutions": [{{"query": 1}}]}}', ""),
])
def test_a_lock_that_does_not_read_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "matrix.lock.json"
    path.write_text(text)
    with pytest.raises(UsageError) as exc:
        read_lock(path)
    message = str(exc.value)
    assert message.startswith(f"{path}: not a lock this harness reads (")
    assert why in message and message.endswith("; delete it and run `harness lock`")
    assert "\n" not in message


def test_no_lock_is_an_empty_one(tmp_path: Path) -> None:
    assert read_lock(tmp_path / "matrix.lock.json") == {}


def test_a_lock_path_that_cannot_be_a_file_is_one_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """A folder named as the lock, and -m with a name too long for a lock beside it, were
    OSError tracebacks (the folder when the lock was written)."""
    (tmp_path / "a-file").write_text("")
    assert read_lock(tmp_path / "a-file" / "m.lock.json") == {}  # -m's own read says why
    (tmp_path / "matrix.lock.json").mkdir()
    with pytest.raises(UsageError, match=r"^cannot read .*matrix.lock.json: Is a directory$"):
        read_lock(tmp_path / "matrix.lock.json")
    assert main(["plan", "-m", str(tmp_path / ("m" * 250 + ".yaml"))]) == 2
    assert capsys.readouterr().err.endswith(".lock.json: File name too long\n")
