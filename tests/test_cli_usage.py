"""Usage errors argparse finds (a missing command, an unknown flag, a bad choice) are one
line and exit 2, as every other error; ``--help`` still prints the whole usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


@pytest.mark.parametrize(("args", "said"), [
    ((), "harness: error: give a command: plan, run,"),
    (("--bogus",), "harness: error: give a command:"),
    (("plan", "-m"), "harness plan: error: argument -m/--matrix: expected one argument"),
    (("plan", "--format", "bogus"), "harness plan: error: argument --format: invalid choice: "
                                    "'bogus'"),
    (("merge",), "harness merge: error: the following arguments are required: runs"),
    (("run", "--fail-on", "bogus"), "harness run: error: argument --fail-on: invalid choice"),
    # It said "harness: error: ... (see harness --help)": the options are in run's --help.
    (("run", "--diff", "x"), "harness run: error: unrecognized arguments: --diff x (see harness "
                             "run --help)"),
])
def test_a_usage_error_is_one_line(args: tuple[str, ...], said: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(said), err
    assert err.count("\n") == 1 and "usage:" not in err, err


def test_a_path_with_a_newline_is_quoted_in_one_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """It printed the path as it is: an error of two lines."""
    assert main(["plan", "-m", str(tmp_path / "a\nb.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.endswith("a b.yaml: No such file or directory\n") and err.count("\n") == 1, err


def test_help_still_prints_the_whole_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: harness plan") and "--format" in out and "--refresh" in out
