"""The fast JSON writer takes every value the standard library took, and json reads it back."""

from __future__ import annotations

import json

import pytest

from harness.core import jsonio


@pytest.mark.parametrize("value", [
    {"reason": "caf\u00e9 \u2014 \U0001f525", "duration": 1795447232.3585503, "gpu": None},
    {"reason": "a lone surrogate from a crashed log: \udc80"},  # orjson refuses these
    {"attempts": 2 ** 70},  # past 64 bits
    {1: "a key that is not a string"},
    [0.1, 1e-300, -0.0, True, False, ""],
])
def test_what_json_wrote_is_written_and_read_back_alike(value: object) -> None:
    written = jsonio.dumps(value)
    assert b"\n" not in written  # one line of a JSON-lines record
    assert json.loads(written) == json.loads(json.dumps(value))


def test_values_json_cannot_represent_go_through_default() -> None:
    from pathlib import Path

    assert json.loads(jsonio.dumps({"path": Path("/x/y")})) == {"path": "/x/y"}


@pytest.mark.parametrize("count", [0, 1, 4, 5, 6, 23])
def test_an_array_written_a_few_items_at_a_time_is_the_whole_array(count: int) -> None:
    import io

    items = [{"n": i, "reason": "<b>ü</b>"} for i in range(count)]
    out = io.BytesIO()
    jsonio.write_array(out, items, step=5)
    assert json.loads(out.getvalue()) == items
    assert out.getvalue() == jsonio.dumps(items)  # the same bytes as in one go


@pytest.mark.parametrize("text", [
    b'{"reason": "caf\\u00e9", "duration": 1795447232.3585503, "gpu": null}',
    b'{"reason": "a lone surrogate: \\udc80"}',  # orjson refuses it
    b'{"attempts": 1180591620717411303424}',  # 2**70: orjson may read it as a float
    b'{"seed": -9223372036854775809}',  # below -2**63 in 19 digits: the same
    b'{"seed": 18446744073709551615, "low": -9223372036854775808}',  # the ends of 64 bits
    b'[NaN, Infinity, -Infinity]',  # json writes these, orjson refuses them
    b'{"a": 1, "a": 2}',
    b'[0.1, 1e-300, -0.0, true, false, ""]',
])
def test_read_as_json_reads_it(text: bytes) -> None:
    got, want = jsonio.loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)  # NaN != NaN; their texts are equal
    assert [type(v) for v in (got if isinstance(got, list) else got.values())] == [
        type(v) for v in (want if isinstance(want, list) else want.values())]


def test_what_neither_reads_is_json_s_error() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        jsonio.loads(b'{"torn": ')
