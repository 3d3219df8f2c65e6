"""Usage errors argparse finds (a missing command, an unknown flag, a bad choice) are one
line and exit 2, as every other error; ``--help`` still prints the whole usage."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness.cli import main
from tests.inproc import Ran, harness_main


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
    # An option of harness itself after the command: where it goes, not only run's --help.
    (("plan", "--reports", "x"), "harness plan: error: unrecognized arguments: --reports x; "
                                 "--reports is an option of harness itself: give it before "
                                 "the command"),
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
    ran = harness_main(capsys, "plan", "-m", "a\nb.yaml", cwd=tmp_path)
    err = ran.stderr
    assert ran.returncode == 2
    assert err.endswith("a b.yaml: No such file or directory\n") and err.count("\n") == 1, err


def test_help_still_prints_the_whole_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: harness plan") and "--format" in out and "--refresh" in out


@pytest.mark.parametrize(("command", "said"), [
    ("plan", "harness: interrupted\n"),  # it said a run's results were kept, to resume
    ("run", "harness: interrupted; finished results are kept (resume with --resume latest)\n")])
def test_ctrl_c_says_what_is_kept_only_where_a_run_keeps_it(
        command: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    module = importlib.import_module(f"harness.commands.{command}")
    monkeypatch.setattr(module, f"cmd_{command}", interrupted)
    assert harness_main(capsys, command, cwd=tmp_path) == Ran(130, "", said)
