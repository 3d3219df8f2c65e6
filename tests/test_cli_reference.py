"""docs/cli.md is what the parser says: regenerate it with `nox -s docs` when this fails."""

from __future__ import annotations

import argparse

from harness.cli import build_parser, reference
from tests.conftest import ROOT


def test_docs_cli_md_is_the_parser_s_reference() -> None:
    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert written == reference(), "docs/cli.md is stale: run `nox -s docs`"


def test_the_reference_names_every_command_and_option() -> None:
    text = reference()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        assert f"## harness {name}\n" in text
        for action in sub._actions:
            for option in action.option_strings:
                assert option in text, f"harness {name} {option}"


def test_an_option_s_values_are_listed_as_its_usage_shows_them() -> None:
    # `--between GOOD_RUN BAD_RUN`, as in the usage line: not a Python tuple
    text = reference()
    assert "- `--between GOOD_RUN BAD_RUN`:" in text
    assert "('GOOD_RUN'" not in text
