"""The merge holds one copy of what many results hold equal (``_Common``): each repeated
string, each environment's ``values``; never one that is not equal, in the same order, of the
same type."""

from __future__ import annotations

from typing import Any

from harness.records.merge import _Common


def row(**changes: Any) -> dict[str, Any]:
    return {"run_id": "".join(["shard-", "1"]), "environment": "".join(["env", "-a"]),
            "values": {"torch": "2.1.2", "numpy": ">=2"}, "reason": "".join(["bo", "om"]),
            "node": "n", **changes}


def test_equal_strings_and_values_are_one_object() -> None:
    common = _Common()
    a, b = row(), row()
    assert a["environment"] is not b["environment"]  # as decoded: a copy each
    common.share(a)
    common.share(b)
    for name in ("run_id", "environment", "reason", "values"):
        assert a[name] is b[name], name
    assert a == row()  # the same content


def test_values_in_another_order_or_of_another_type_are_not_shared() -> None:
    common = _Common()
    a = row()
    b = row(values={"numpy": ">=2", "torch": "2.1.2"})  # encodes otherwise
    c = row(node=1, values={"torch": 2.1})
    d = row(node=True, values={"torch": ["2.1.2"]})  # not hashable: its own
    for each in (a, b, c, d):
        common.share(each)
    assert a["values"] is not b["values"] and list(b["values"]) == ["numpy", "torch"]
    assert c["node"] == 1 and d["node"] is True and d["values"] == {"torch": ["2.1.2"]}
    # Equal, yet encoded otherwise: never one for the other.
    for first, then in ((True, 1), (1, 1.0), (0.0, -0.0), (1.0, True)):
        f, g = row(values={"torch": first}), row(values={"torch": then})
        common.share(f)
        common.share(g)
        assert repr(f["values"]["torch"]) == repr(first)
        assert repr(g["values"]["torch"]) == repr(then)
