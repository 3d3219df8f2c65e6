"""The case API (``Signature``, ``requires``, ``Case``) and the pytest plugin that runs cases
inside an environment under test; stdlib + pytest only, put on PYTHONPATH there."""

from __future__ import annotations

import collections
import importlib.metadata as md
import itertools
import json
import os
import re
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import harness_probe
import pytest
from harness_events import Events, claim, skip_reason
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version


@dataclass(frozen=True)
class Signature:
    """A documented failure: exception type (by name, anywhere in its MRO) and message regex."""

    name: str
    exc_type: str
    pattern: str

    def matches(self, exc: BaseException) -> bool:
        """Whether ``exc``, or one it was raised from or during, is this failure."""
        return self.evidence(exc) is not None

    def evidence(self, exc: BaseException) -> str | None:
        """The exception's first line and, when the match lies deeper (a compiler error in a
        build log), the line where it ends."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            text = str(current)
            found = re.search(self.pattern, text) if any(
                self.exc_type in (k.__name__, f"{k.__module__}.{k.__qualname__}")
                for k in type(current).__mro__) else None
            if found:
                head = f"{type(current).__name__}: {text}".strip().splitlines()[0][:300]
                last = max(found.end() - 1, found.start())
                start = text.rfind("\n", 0, last) + 1
                end = text.find("\n", last)
                line = text[start:end if end != -1 else None].strip()[:400]
                return head if line in head else f"{head} ... {line}"
            current = current.__cause__ or current.__context__
        return None

    @property
    def reproduces(self) -> pytest.MarkDecorator:
        return pytest.mark.reproduces(self)


@dataclass(frozen=True)
class Case:
    """A case module's metadata, declared as ``CASE = Case(...)``."""

    upstream: tuple[str, ...] = ()  # reports and fixes: ``owner/repo#N`` or URLs
    failure: str = ""  # in one line (default: the module docstring's first line)
    retries: int = 0  # a failed variant's reruns (or the environment's, the larger)
    about: tuple[str, ...] = ()  # the distributions deciding the failure, most telling first


def caveat(text: str) -> pytest.MarkDecorator:
    """A variant whose PASS is not a fix (a workaround that turns FP8 off); for one that holds
    only sometimes, call the ``harness_caveat`` fixture."""
    return pytest.mark.caveat(text)


@dataclass(frozen=True)
class Requirements:
    """What a case needs. Unmet → SKIP with the reason in words, never PASS."""

    cuda: bool = False
    cc: str | None = None  # specifier on the compute capability: ">=8.9"
    cc_why: str | None = None  # in the user's words ("needs a pre-Ada GPU")
    packages: dict[str, str] = field(default_factory=dict)  # distribution -> specifier
    nvcc: str | None = None  # specifier on the CUDA compiler's version
    executables: tuple[str, ...] = ()

    def unmet(self) -> str | None:
        for name, spec in self.packages.items():
            try:
                version = md.version(name)
            except md.PackageNotFoundError:
                return f"needs {name}{spec or ''}; {name} is not installed"
            if spec and not SpecifierSet(spec).contains(Version(version).public,
                                                        prereleases=True):
                return f"needs {name}{spec}; this environment has {version}"
        for exe in self.executables:
            if shutil.which(exe) is None:
                return f"needs {exe} on PATH; not found"
        if self.nvcc is not None:
            found = harness_probe.nvcc_version()
            if found is None:
                return f"needs nvcc {self.nvcc}; no nvcc found"
            if not SpecifierSet(self.nvcc).contains(found, prereleases=True):
                return f"needs nvcc {self.nvcc}; this nvcc is {found}"
        if not (self.cuda or self.cc):
            return None
        capability = _visible_capability()
        if capability is None:
            return "needs a CUDA GPU; none is visible to this cell"
        if self.cc and not SpecifierSet(self.cc).contains(capability, prereleases=True):
            why = self.cc_why or f"needs compute capability {self.cc}"
            return f"{why}; this GPU is {capability}"
        return None


def _visible_capability() -> str | None:
    """The first visible GPU's compute capability, as torch sees it (else nvidia-smi)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability(0)
        return f"{major}.{minor}"
    except ImportError:
        gpus = harness_probe.probe_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return gpus[0]["compute_capability"] if gpus else None


def requires(**kwargs: Any) -> pytest.MarkDecorator:
    """``@requires(cuda=True, cc=">=8.9", packages={"torch": ">=2.1"}, nvcc=">=12.3")``."""
    if "executables" in kwargs:
        kwargs["executables"] = tuple(kwargs["executables"])
    req = Requirements(**kwargs)
    for spec in [req.cc, req.nvcc, *req.packages.values()]:
        if spec:
            try:
                SpecifierSet(spec)
            except InvalidSpecifier as exc:
                raise ValueError(f"bad version specifier {spec!r}: {exc}") from None
    return pytest.mark.requires(req)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption("--harness-events", default=None,
                    help="append one JSON line per case event to this file")
    group.addoption("--harness-collect", default=None,
                    help="write the collected cases as JSON to this file")
    group.addoption("--harness-queue", default=None,
                    help="draw each next case from this folder of claims shared by processes")
    group.addoption("--harness-token", default="",
                    help="what this process's claims in --harness-queue hold")
    group.addoption("--harness-drawers", type=int, default=1,
                    help="how many processes draw from --harness-queue")


def pytest_configure(config: pytest.Config) -> None:
    for marker in ("requires(req): what the case needs (harness_case)",
                   "reproduces(sig): a documented failure (harness_case)",
                   "caveat(text): why a PASS is not a fix (harness_case)",
                   "isolate: needs a pytest process of its own"):
        config.addinivalue_line("markers", marker)
    path = config.getoption("--harness-events")
    config.stash[_WRITER] = Events(path) if path else None


_WRITER = pytest.StashKey["Events | None"]()
_STATE = pytest.StashKey[dict[str, Any]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    writer = session.config.stash[_WRITER]
    if writer:
        writer.write(event="session", pid=os.getpid(), time=time.time(),
                     hardware=harness_probe.probe(os.environ.get("CUDA_VISIBLE_DEVICES")))


def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("--harness-collect")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump([describe(item) for item in session.items], fh, indent=1)


def describe(item: pytest.Item) -> dict[str, Any]:
    stem = os.path.basename(item.nodeid.split("::", 1)[0])[: -len(".py")]
    reqs = [m.args[0] for m in item.iter_markers("requires") if m.args]
    module_obj = getattr(item, "module", None)
    doc = (getattr(module_obj, "__doc__", None) or "").strip()
    title = doc.splitlines()[0] if doc else ""
    case = getattr(module_obj, "CASE", None)
    case = case if isinstance(case, Case) else Case()
    function = getattr(item, "function", None)
    return {
        "nodeid": item.nodeid, "case_id": stem.removeprefix("test_"),
        "variant": item.name.removeprefix("test_"), "title": title,
        "failure": case.failure or title, "upstream": list(case.upstream),
        "retries": case.retries, "about": list(case.about), "description": doc,
        "doc": (getattr(function, "__doc__", None) or "").strip(),
        "markers": sorted({m.name for m in item.iter_markers()}),
        "requires": [asdict(r) for r in reqs],
        "signatures": [asdict(m.args[0]) for m in item.iter_markers("reproduces")],
        "caveats": [str(m.args[0]) for m in item.iter_markers("caveat") if m.args],
    }


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    writer = session.config.stash[_WRITER]
    if writer:
        writer.fh.close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires"):
        problem = marker.args[0].unmet()
        if problem:
            pytest.skip(problem)


@pytest.fixture
def harness_record(request: pytest.FixtureRequest) -> Callable[[str, Any], None]:
    """Record a finding next to the outcome (e.g. how many TE modules remain)."""
    details: dict[str, Any] = request.node.stash[_STATE]["details"]
    return details.__setitem__


@pytest.fixture
def harness_variables() -> dict[str, str]:
    """The cell's variable axes (``init_device: cpu``): settings, not packages."""
    data: dict[str, str] = json.loads(os.environ.get("HARNESS_VARIABLES") or "{}")
    return data


@pytest.fixture
def harness_caveat(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Say why this PASS is not a fix, when that depends on what the case found."""
    state: dict[str, Any] = request.node.stash[_STATE]
    return lambda text: state.__setitem__("caveat", text)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    report = yield
    item.stash[_STATE].setdefault("phases", {})[call.when] = (report, call.excinfo)
    return report


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Iterator[None]:
    writer = item.config.stash[_WRITER]
    state = item.stash[_STATE] = {"start": time.monotonic(), "details": {}}
    # Several cells in one process: each case sees its own cell id, as if alone.
    cell_ids = json.loads(os.environ.get("HARNESS_CELL_IDS") or "{}")
    if item.nodeid in cell_ids:
        os.environ["HARNESS_CELL_ID"] = cell_ids[item.nodeid]
    if writer:  # written before the case runs, so a crash inside it is attributed to it
        writer.write(event="start", nodeid=item.nodeid, time=time.time())
    yield
    result = classify(item, state.get("phases", {}))
    caveat_text = state.get("caveat") or next(
        (str(m.args[0]) for m in item.iter_markers("caveat") if m.args), "")
    if caveat_text and result["outcome"] == "PASS":
        result["caveat"] = caveat_text
    if writer:
        writer.write(event="finish", nodeid=item.nodeid, time=time.time(),
                     duration=round(time.monotonic() - state["start"], 3),
                     details=state["details"], **result)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """With ``--harness-queue``: run the cases no other process claimed, claiming the next one
    ahead (as xdist does) unless near the end, where none is held ahead."""
    folder = session.config.getoption("--harness-queue")
    if not folder:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} errors during collection")
    if session.config.option.collectonly:
        return True
    cell_ids: dict[str, str] = json.loads(os.environ.get("HARNESS_CELL_IDS") or "{}")
    token = session.config.getoption("--harness-token")
    drawers = session.config.getoption("--harness-drawers")
    pending = collections.deque((i, os.path.join(folder, cell_ids[i.nodeid]))
                                for i in session.items if i.nodeid in cell_ids)

    def take() -> pytest.Item | None:
        """Claim the first item no process has claimed; None when every one is."""
        while pending:
            item, path = pending.popleft()
            if claim(path, token):
                return item
        return None

    def free_more_than(n: int) -> bool:  # looking no further than needed
        free = (p for _, p in pending if not os.path.exists(p))
        return next(itertools.islice(free, n, None), None) is not None

    item = take()
    while item is not None:
        nextitem = take() if free_more_than(drawers) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = nextitem or take()
    writer = session.config.stash[_WRITER]
    if writer:  # asked for, not collected (a conftest deselected it): no process can run it
        collected = {i.nodeid for i in session.items}
        writer.write(event="drained", time=time.time(),
                     missing=[n for n in cell_ids if n not in collected])
    return True


def classify(item: pytest.Item, phases: dict[str, Any]) -> dict[str, Any]:
    """Map pytest's phase reports to one harness outcome."""
    for when in ("setup", "call", "teardown"):
        if when not in phases:
            continue
        report, excinfo = phases[when]
        if report.skipped:
            return {"outcome": "SKIP", "reason": skip_reason(report)}
        if report.failed and when == "call" and excinfo is not None:
            for marker in item.iter_markers("reproduces"):
                sig: Signature = marker.args[0]
                evidence = sig.evidence(excinfo.value)
                if evidence is not None:
                    return {"outcome": "REPRODUCED", "signature": sig.name, "reason": evidence}
            return {"outcome": "FAIL", "reason": _excerpt(excinfo.value), "traceback": "".join(
                traceback.format_exception(excinfo.value)[-6:])[-2000:]}
        if report.failed:
            exc = excinfo.value if excinfo is not None else None
            return {"outcome": "ERROR", "reason": f"{when} failed: "
                    + (_excerpt(exc) if exc else str(report.longrepr)[-300:])}
    return {"outcome": "PASS"}


def _excerpt(exc: BaseException) -> str:
    return "\n".join(f"{type(exc).__name__}: {exc}".strip().splitlines()[:3])[:400]
