"""A named environment's pins: a setting among them is named as one, whatever its value."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.matrix.load import parse_matrix


@pytest.mark.parametrize("pin", ["timeout: 5", "memory: '16g'", "python: '3.11'",
                                 "hardware: [cpu]"])
def test_a_setting_among_pins_is_refused_as_a_setting(pin: str) -> None:
    text = f"version: 1\nenvironments:\n  a:\n    pins: {{torch: '2.1.2', {pin}}}\n"
    key = pin.split(":", 1)[0]
    with pytest.raises(SpecError) as exc:
        parse_matrix(text, file="m.yaml", base=Path())
    assert str(exc.value) == f"m.yaml:4: environments.a.pins.{key}: {key!r} is a setting, not a pin"
