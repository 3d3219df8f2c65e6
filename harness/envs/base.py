"""The contract every environment backend meets, and what they share: launch, fingerprint,
drift, the build lock and a source build's progress lines."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import psutil
from filelock import FileLock, Timeout
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.core.errors import BackendError, DriftError, EnvBuildError, EnvImportError
from harness.core.matrix import EnvSpec, requirement_name
from harness.core.reaper import kill_members, new_token
from harness.core.redact import passed
from harness.core.releases import parsed
from harness.envs import wheelkey
from harness.inenv import harness_fingerprint, harness_probe

FINGERPRINT_SCRIPT = Path(harness_fingerprint.__file__)


@dataclass(frozen=True, kw_only=True)
class Environment:
    """A realized environment: where it lives and what is really installed in it."""

    spec: EnvSpec
    location: str
    python: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    built: bool = False  # True when this realize() had to build it

    @property
    def summary(self) -> dict[str, Any]:
        """The part of the fingerprint every result holds, with the requirements as asked."""
        fp = self.fingerprint
        return {"python": fp.get("python"), "key": fp.get("key", {}),
                "torch": fp.get("torch", {}), "freeze_sha256": fp.get("freeze_sha256"),
                "requirements": list(self.spec.requirements),
                **{k: fp[k] for k in ("overlay", "provenance") if k in fp}}


@dataclass(frozen=True, kw_only=True)
class LaunchRequest:
    """One pytest process: ``argv`` after the interpreter, ``env`` the cell's own variables,
    ``work_dir`` its scratch folder (writable from inside a container)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    log: Path
    work_dir: Path
    cases_dir: Path
    gpu: int | None
    timeout: float
    memory: int | None = None  # bytes; enforced by the backend (an rlimit, a cgroup)
    mounts: tuple[Path, ...] = ()  # read at their own paths (a suite's folder): ro in a container
    queue: Path | None = None  # the claims folder a queue's processes share (``run.queue``)


class Process(Protocol):
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None when ``timeout`` seconds passed first. Raises InfraError
        when the machine cannot say (a Docker API that stopped answering)."""


class LocalProcess:
    """A process in its own session, so a kill takes its whole group (workers, compilers);
    when it ends, what it left running with its token goes too (a case's ``sleep &``)."""

    def __init__(self, popen: subprocess.Popen[Any], token: str) -> None:
        self.popen, self.token = popen, token

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self.token:
            kill_members(self.token)
            self.token = ""  # done once
        return code


try:  # loaded here: the child of a threaded parent must not import anything
    _LIBC: Any = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None


def _child_setup(memory: int | None) -> Callable[[], None]:
    """Before exec: die with the thread that started it, and take the memory limit as
    RLIMIT_DATA (CUDA reserves far more address space than it uses: RLIMIT_AS fails it)."""

    def setup() -> None:
        if _LIBC is not None:
            _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))

    return setup


def start_group(argv: list[str], env: dict[str, str], **popen: Any) -> LocalProcess:
    """``argv`` in a session of its own, its members marked with this harness's token
    (``reaper``)."""
    token = new_token()
    proc = subprocess.Popen(argv, env={**env, "HARNESS_GROUP": token}, start_new_session=True,
                            **popen)
    return LocalProcess(proc, token)


def launch_local(python: str, request: LaunchRequest) -> LocalProcess:
    env = {**passed(os.environ), **request.env}  # the machine's variables, less its secrets
    toolkit = harness_probe.cuda_home()
    if toolkit and "CUDA_HOME" not in env:  # for JIT builds: torch's guess fails on wrappers
        env["CUDA_HOME"] = toolkit
    with open(request.log, "ab") as log:
        return start_group([python, *request.argv], env, cwd=request.cwd, stdout=log,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           preexec_fn=_child_setup(request.memory))  # safe under threads


@dataclass(frozen=True)
class Realizing:
    """An environment cells can start in, and the check still running beside them (None when
    ``env`` is already checked)."""

    env: Environment
    checked: Future[Environment] | None = None


#: What a build calls once cells could start in its environment (``Backend.begin``).
Handover = Callable[[Environment], None]


class Backend(ABC):
    """``realize``: under the lock, the environment found or built, then drift checked every
    time. A backend implements ``_locate``, ``_build_dir``, ``_find``, ``_build``, and
    ``launch`` unless its processes start on this machine."""

    name: ClassVar[str]
    #: Whether ``realize`` imports the packages the spec names (and fails if they do not).
    checks_imports: ClassVar[bool] = False
    #: Whether ``_build`` can hand a new environment over before its check (``begin``).
    hands_over: ClassVar[bool] = False

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    @property
    def root(self) -> Path:
        return self.cache_dir / self.name  # where what it builds is kept

    def realize(self, spec: EnvSpec, *, handover: Handover | None = None) -> Environment:
        place = self._locate(spec)
        folder = self._build_dir(place)
        with (locked(folder.with_name(folder.name + ".lock")) if folder is not None
              else contextlib.nullcontext()):
            env = self._find(spec, place)
            if env is None:
                with watched(spec, [str(folder)] if folder is not None else []):
                    env = self._build(spec, place, handover)
        problems = drift(spec, env.fingerprint)
        if problems:
            raise DriftError("drift: " + "; ".join(problems))
        return env

    def begin(self, spec: EnvSpec) -> Realizing:
        """``realize``, returning once cells can start: a new environment's check then runs
        beside its first cells, whose results wait for ``checked``."""
        if not self.hands_over:
            return Realizing(self.realize(spec))
        handed: queue.SimpleQueue[Environment | None] = queue.SimpleQueue()
        checked: Future[Environment] = Future()

        def build() -> None:
            try:
                checked.set_result(self.realize(spec, handover=handed.put))
            except BaseException as exc:  # given to whoever waits, as raised
                checked.set_exception(exc)
            finally:
                handed.put(None)  # never handed over: the result is all there is

        # Not a daemon: a harness sent SIGTERM mid-check lets the check write its marker; one
        # killed takes the check along (PDEATHSIG), and the venv is built again next time.
        threading.Thread(target=build, name=f"check {spec.name}").start()
        env = handed.get()
        return Realizing(checked.result()) if env is None else Realizing(env, checked)

    def _locate(self, spec: EnvSpec) -> Any:
        return None  # where the environment lives (a folder, an image plan), for the steps

    def _build_dir(self, place: Any) -> Path | None:
        return None  # the folder a build makes, its lock beside it; None: nothing is built

    @abstractmethod
    def _find(self, spec: EnvSpec, place: Any) -> Environment | None:
        """The environment, if it is there and current (``refresh_before``)."""

    def _build(self, spec: EnvSpec, place: Any, handover: Handover | None = None
               ) -> Environment:
        """Install, check, fingerprint, record it last (a half-built one is never found)."""
        raise NotImplementedError(f"the {self.name} backend builds nothing")

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        return launch_local(env.python, request)

    def listing_key(self, spec: EnvSpec) -> str:
        return spec.key  # as ``listing`` shows it

    def listing(self) -> list[dict[str, Any]]:
        return []

    def remove_location(self, location: str) -> None:  # what ``envs prune`` calls
        shutil.rmtree(location, ignore_errors=True)
        lock = Path(location + ".lock")  # ``realize``'s, and ``locked``'s holder: unless held
        with contextlib.suppress(Timeout, OSError), FileLock(lock, timeout=0):
            lock.with_name(lock.name + ".holder").unlink(missing_ok=True)
            lock.unlink()


def bytecode_variables(location: str | Path) -> dict[str, str]:
    """Compiled bytecode in a folder of the environment's own, never beside the sources: uv
    installs no .pyc, and every cell would compile torch's modules again."""
    return {"PYTHONPYCACHEPREFIX": str(Path(location) / ".pycache"),
            "PYTHONDONTWRITEBYTECODE": ""}  # empty: unset, to Python


def purelib(python: str) -> Path:  # the site-packages folder of ``python``'s environment
    return Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=120).stdout.strip())


def read_fingerprint(python: str, spec: EnvSpec | None = None, *, timeout: float = 900,
                     variables: dict[str, str] | None = None) -> dict[str, Any]:
    """What the environment of ``python`` holds; with ``spec``, first its distributions'
    imports (no GPU, a throwaway HOME), EnvImportError when one fails."""
    names = sorted({requirement_name(r) for r in spec.requirements}) if spec else []

    def failure(problem: str) -> BackendError:
        if spec and names:
            return EnvImportError(f"{spec.name} was built but does not import: importing "
                                  f"{', '.join(names)} {problem}")
        return DriftError(f"cannot fingerprint the environment: {problem}")

    with tempfile.TemporaryDirectory(prefix="harness-imports-") as home:
        env = {**os.environ, "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1",
               **({"HOME": home} if spec else {}), **(variables or {})}
        try:
            proc = subprocess.run([python, str(FINGERPRINT_SCRIPT), "--import", *names],
                                  capture_output=True, text=True, timeout=timeout,
                                  check=False, env=env, cwd=home,
                                  preexec_fn=_child_setup(None))
        except subprocess.TimeoutExpired:
            raise failure(f"took over {timeout:g} s") from None
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
    if proc.returncode != 0:
        raise failure(f"killed the interpreter (exit {proc.returncode}): {tail}")
    try:
        fingerprint: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        raise failure(f"printed no result: {tail}") from None
    report: dict[str, dict[str, str | None]] = fingerprint.pop("imports")
    problems = [f"{dist}: {module}: {error}" if module else f"{dist}: {error}"
                for dist, modules in sorted(report.items())
                for module, error in sorted(modules.items()) if error]
    if spec and problems:
        raise EnvImportError(f"{spec.name} was built but does not import: " + "; ".join(problems))
    return fingerprint


def drift(spec: EnvSpec, fingerprint: dict[str, Any]) -> list[str]:
    """What the environment holds that its spec did not ask for. Empty: no drift."""
    problems = []
    python = fingerprint.get("python", "")
    # An overlay's Python is its base's: `python:` does not choose it.
    if not spec.base and not (python == spec.python or python.startswith(spec.python + ".")):
        problems.append(f"asked Python {spec.python}, got {python}")
    packages = {str(canonicalize_name(k)): str(v)
                for k, v in fingerprint.get("packages", {}).items()}
    # The axes' pins and the `packages:` entries alike.
    problems += filter(None, (_unmet(text, packages) for text in spec.requirements))
    torch = fingerprint.get("torch") or {}
    built = torch.get("cuda")
    if torch.get("import_error"):
        problems.append(f"torch does not import: {torch['import_error']}")
    elif spec.cuda and torch and (bool(built) if spec.cuda == "cpu" else not built or
                                  built.split(".")[:2] != spec.cuda.split(".")[:2]):
        asked = "a CPU build" if spec.cuda == "cpu" else f"CUDA {spec.cuda}"
        got = f"a CUDA {built} build" if built else "a CPU build"
        problems.append(f"asked {asked}, got {got} (torch {torch.get('version')})")
    return problems


def _unmet(text: str, packages: dict[str, str]) -> str | None:  # one requirement's problem
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None  # the resolver has already had its say about this line
    if requirement.marker is not None and not requirement.marker.evaluate():
        return None
    name = canonicalize_name(requirement.name)
    got = packages.get(name)
    if got is None:
        return f"asked {text}, but {name} is not installed"
    if requirement.url or not requirement.specifier:
        return None
    try:
        # A local build (2.1.2+cu121) satisfies ==2.1.2, as pip's resolver has it.
        version = Version(got)
        ok = requirement.specifier.contains(version, prereleases=True) or \
            requirement.specifier.contains(version.public, prereleases=True)
    except InvalidVersion:
        ok = got in {s.version for s in requirement.specifier}
    return None if ok else f"asked {text}, got {name} {got}"


#: The oldest Python the in-environment plugin and fingerprint (harness/inenv) run on.
MIN_PYTHON = (3, 9)
NEEDS_PYTHON = "the harness runs cells on Python 3.9 or newer"


def check_python(spec: EnvSpec) -> None:
    """EnvBuildError when the environment's Python is older than the harness runs cells on."""
    version = None if spec.base else parsed(spec.python)  # an overlay runs on its base's
    if version is not None and version.release[:2] < MIN_PYTHON:
        raise EnvBuildError(f"{spec.name}: Python {spec.python}: {NEEDS_PYTHON}")


#: A source build of TransformerEngine takes most of an hour: twice that is a hung build.
LOCK_TIMEOUT = 2 * 3600.0
LOCK_NOTICE = 10.0  # waited this long, say once who holds the lock


@contextlib.contextmanager
def locked(path: Path, *, timeout: float = LOCK_TIMEOUT, notice: float = LOCK_NOTICE
           ) -> Iterator[None]:
    """Two runs sharing a cache build an environment once; a waiter says whom it waits for
    (the holder writes it beside the lock) and gives up after ``timeout``."""
    lock = FileLock(path)
    holder = path.with_name(path.name + ".holder")
    me = f"pid {os.getpid()} on {socket.gethostname()}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=min(notice, timeout))
    except Timeout:
        try:
            who = holder.read_text().strip() or "another process"
        except OSError:
            who = "another process (it did not say who)"
        if not who.startswith(me):  # another thread of this run: nothing to tell
            print(f"harness: waiting for {path}, held by {who}", file=sys.stderr, flush=True)
        try:
            lock.acquire(timeout=max(0.0, timeout - notice))
        except Timeout:
            raise EnvBuildError(f"{path}: still locked after {timeout:g} s by {who}; if that "
                                "process is gone, remove the lock file") from None
    except OSError as exc:  # HARNESS_CACHE_DIR a file, or not writable: not a backend bug
        raise EnvBuildError(f"cache folder {path.parent}: {exc.strerror or exc}") from None
    try:
        with contextlib.suppress(OSError):
            holder.write_text(f"{me} since {time.strftime('%H:%M:%S')}: "
                              f"{' '.join(sys.argv)[:200]}")
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


#: Seconds between a source build's progress lines: a CI log silent for 40 minutes reads as hung.
BUILD_EVERY = 60.0


@contextlib.contextmanager
def watched(spec: EnvSpec, places: Sequence[str]) -> Iterator[None]:
    """Around a source build of ``spec``: what and why at its start, how long and its step
    (``current_step``) every BUILD_EVERY seconds, and its end."""
    if not spec.source_builds:
        yield
        return
    what = ", ".join(b.dist for b in spec.source_builds)
    started, stop = time.monotonic(), threading.Event()
    why = ("--refresh asked for a new build" if spec.refresh_before else
           "not built on this machine yet")
    if wheelkey.filed(spec.find_links):
        doing = f"installing {what}"
        _say(spec, f"{doing}: from the wheel folder where a wheel fits, else built from source "
             f"({why})")
    else:
        doing = f"building {what} from source"
        _say(spec, f"{doing} (the matrix's build: setting; {why})")

    def took() -> str:
        minutes, secs = divmod(int(time.monotonic() - started), 60)
        return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"

    def beat() -> None:
        while not stop.wait(BUILD_EVERY):
            step = current_step(places)
            _say(spec, f"still {doing}, {took()}" + (f"; now: {step}" if step else ""))

    ticker = threading.Thread(target=beat, name=f"build progress {spec.name}", daemon=True)
    ticker.start()
    ended = "failed"
    try:
        yield
        ended = "done"
    finally:
        stop.set()
        ticker.join()
        _say(spec, f"{doing} {ended} after {took()}")


def _say(spec: EnvSpec, text: str) -> None:
    print(f"environment {spec.name}: {text}", file=sys.stderr, flush=True)


def current_step(places: Sequence[str]) -> str | None:
    """The newest process under one whose command line names one of ``places``, as its
    program and the last argument that names a file (``nvcc ... gemm.cu``)."""
    if not places:
        return None
    below: list[tuple[float, list[str]]] = []
    for root in psutil.process_iter(["cmdline"]):
        if not any(place in arg for arg in root.info["cmdline"] or () for place in places):
            continue
        # The build's own command (uv) is not a step; what it started is, its interpreter too.
        with contextlib.suppress(psutil.Error):
            for proc in root.children(recursive=True):
                with contextlib.suppress(psutil.Error):  # ended meanwhile
                    below.append((proc.create_time(), proc.cmdline()))
    argv = max(below)[1] if below else None
    if not argv:
        return None
    files = [a for a in argv[1:] if not a.startswith("-") and "." in Path(a).name]
    return (Path(argv[0]).name + (f" ... {'/'.join(Path(files[-1]).parts[-3:])}"
                                  if files else ""))[:200]
