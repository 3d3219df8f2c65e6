"""What ``envs list`` and ``envs prune`` see of the uv environments in a cache folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from filelock import FileLock

from harness.core.matrix import EnvSpec
from harness.envs import inventory
from harness.envs.uv import MARKER, UvBackend


def built(folder: Path, spec: EnvSpec) -> Path:
    """An environment's folder as a build leaves it (its marker written last)."""
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(json.dumps({"name": spec.name, "key": spec.key,
                                             "built_at": 1.0, "fingerprint": {}}))
    return folder


def test_a_folder_an_earlier_harness_named_is_listed_as_such_and_pruned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The uv backend alone: the Docker backend would list (and prune) this machine's images.
    monkeypatch.setattr(inventory, "backends", lambda cache: {"uv": UvBackend(cache)})
    spec = EnvSpec(name="cpu:torch=2.0.1,numpy<2", origin="cpu", values=(), backend="uv",
                   python="3.11", requirements=(), pins=())
    other = EnvSpec(name="cpu:torch=2.0.1,numpy>=2", origin="cpu", values=(), backend="uv",
                    python="3.11", requirements=("numpy>=2",), pins=())
    current = built(UvBackend(tmp_path).path_for(spec), spec)
    # the same environment, in the folder an earlier harness named it (numpy<2: "numpy-2")
    earlier = built(tmp_path / "uv" / f"cpu-torch-2.0.1-numpy-2-{spec.key}", spec)
    unused = built(UvBackend(tmp_path).path_for(other), other)
    listed = {Path(e["location"]).name: e["stale"] for e in inventory.listing(tmp_path)}
    assert listed == {current.name: False, earlier.name: True, unused.name: False}
    pruned = inventory.prune(tmp_path, [spec])
    assert {Path(e["location"]) for e in pruned.removed} == {earlier, unused}
    assert current.is_dir() and not earlier.exists() and not unused.exists()


def test_a_half_built_folder_is_listed_and_pruned_unless_a_build_holds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed build's venv (a torch that does not import: gigabytes) was in no listing, so
    even ``prune --all`` left it."""
    monkeypatch.setattr(inventory, "backends", lambda cache: {"uv": UvBackend(cache)})
    spec = EnvSpec(name="cpu:six=99", origin="cpu", values=(), backend="uv", python="3.11",
                   requirements=("six==99",), pins=())
    failed = UvBackend(tmp_path).path_for(spec)
    (failed / "bin").mkdir(parents=True)
    building = tmp_path / "uv" / "other-0123456789abcdef"
    building.mkdir()
    listed = {Path(e["location"]): e["stale"] for e in inventory.listing(tmp_path)}
    assert listed == {failed: True, building: True}
    with FileLock(building.with_name(building.name + ".lock")):  # another run builds it
        pruned = inventory.prune(tmp_path, None)
    assert [Path(e["location"]) for e in pruned.removed] == [failed]
    assert not failed.exists() and building.is_dir()


def test_a_pruned_folder_takes_its_lock_and_holder_with_it_unless_the_lock_is_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pruned environment left its 0-byte ``.lock`` (and a killed build's ``.holder``)."""
    monkeypatch.setattr(inventory, "backends", lambda cache: {"uv": UvBackend(cache)})
    specs = [EnvSpec(name=f"cpu:six={n}", origin="cpu", values=(), backend="uv",
                     python="3.11", requirements=(f"six=={n}",), pins=()) for n in (1, 2)]
    free, held = (built(UvBackend(tmp_path).path_for(spec), spec) for spec in specs)
    for folder in (free, held):
        folder.with_name(folder.name + ".lock").touch()
        folder.with_name(folder.name + ".lock.holder").write_text("pid 1 on gone")
    with FileLock(held.with_name(held.name + ".lock")):  # another run holds it now
        inventory.prune(tmp_path, None)
    assert sorted(p.name for p in (tmp_path / "uv").iterdir()) == [
        held.name + ".lock", held.name + ".lock.holder"]


@pytest.mark.parametrize("text", ['{"key": ', "{}", "[1]"])
def test_an_unreadable_marker_is_a_half_built_folder_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(inventory, "backends", lambda cache: {"uv": UvBackend(cache)})
    folder = tmp_path / "uv" / "a-0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / MARKER).write_text(text)
    assert [(e["location"], e["stale"]) for e in inventory.listing(tmp_path)] == [
        (str(folder), True)]
