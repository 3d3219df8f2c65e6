"""The uv backend against real uv: source builds without isolation, the build cache, PATH,
the import check and the nvcc check. The packages are written on the spot (tests/packages.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError, EnvImportError
from harness.core.matrix import BuildSetting, EnvSpec
from harness.envs import uv
from harness.envs.base import Environment, LaunchRequest, read_fingerprint
from harness.envs.sourcebuild import check_nvcc
from harness.envs.uv import UvBackend
from tests.conftest import PY
from tests.packages import make_sdist, make_wheel

# setup.py imports buildtag (as TE's imports torch) and bakes its version into the package.
SETUP = """\
import pathlib
import buildtag
from setuptools import setup
pathlib.Path("buildprobe/_built.py").write_text(f"BUILT_AGAINST = {buildtag.VERSION!r}\\n")
setup(name="buildprobe", version="0.1", packages=["buildprobe"])
"""
BUILD_PROBE = BuildSetting(dist="buildprobe", isolation=False,
                           requires=("buildtag", "setuptools"))


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheelhouse")
    for version in ("1.0", "2.0"):
        make_wheel(folder, "buildtag", version,
                   {"buildtag/__init__.py": f"VERSION = {version!r}\n"})
    make_sdist(folder, "buildprobe", "0.1", {"setup.py": SETUP, "buildprobe/__init__.py": ""})
    make_wheel(folder, "hello-harness", "1.0",
               {"hello_harness.py": "def main():\n    print('hi')\n"},
               scripts={"hello-harness": "hello_harness:main"})
    make_wheel(folder, "brokenpkg", "1.0", {
        "brokenpkg/__init__.py": "raise ImportError('libfoo.so.1: cannot open shared object')\n"})
    return folder


@pytest.fixture(scope="module")
def hello(tmp_path_factory: pytest.TempPathFactory,
          wheelhouse: Path) -> tuple[UvBackend, Environment]:
    """One environment with hello-harness, for the tests that only launch in it."""
    backend = UvBackend(tmp_path_factory.mktemp("hello") / "cache")
    return backend, backend.realize(spec("hello", ("hello-harness",), wheelhouse))


def spec(name: str, requirements: tuple[str, ...], folder: Path,
         builds: tuple[BuildSetting, ...] = ()) -> EnvSpec:
    return EnvSpec(name=name, origin="test", values=(), backend="uv", python=PY,
                   requirements=requirements, pins=(), builds=builds,
                   find_links=(str(folder),))


def run_in(env_python: str, code: str) -> str:
    return subprocess.run([env_python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_source_build_uses_each_environments_own_build_dependency(
        tmp_path: Path, wheelhouse: Path) -> None:
    """uv caches a wheel built from an sdist by the sdist alone: without a cache per build
    environment, the second environment would get the wheel built against buildtag 1.0."""
    backend = UvBackend(tmp_path / "cache")
    built = {}
    for version in ("1.0", "2.0"):
        env = backend.realize(spec(f"probe-{version}", (f"buildtag=={version}", "buildprobe"),
                                   wheelhouse, (BUILD_PROBE,)))
        built[version] = run_in(env.python, "import buildprobe._built as b; "
                                            "print(b.BUILT_AGAINST)")
    assert built == {"1.0": "1.0", "2.0": "2.0"}


def test_cells_find_the_environments_own_executables_first(
        tmp_path: Path, hello: tuple[UvBackend, Environment]) -> None:
    backend, env = hello
    log = tmp_path / "cell.log"
    request = LaunchRequest(
        argv=("-c", "import shutil; print(shutil.which('hello-harness'))"),
        env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, log=log, work_dir=tmp_path,
        cases_dir=tmp_path, gpu=None, timeout=60)
    assert backend.launch(env, request).wait() == 0
    assert log.read_text().strip() == str(Path(env.location) / "bin" / "hello-harness")


def test_cells_of_an_environment_built_against_a_fetched_toolkit_load_its_libraries(
        tmp_path: Path, hello: tuple[UvBackend, Environment]) -> None:
    """TE's core library has no RUNPATH and loads before torch has loaded cuBLAS: a cell gets
    the environment's own nvidia/*/lib on the loader path, and the toolkit as CUDA_HOME unless
    the matrix's env: names another."""
    backend, env = hello
    (site,) = Path(env.location).glob("lib/python*/site-packages")
    (site / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    built = replace(env, fingerprint={**env.fingerprint, "cuda_home": "/cache/cuda-12.4"})
    code = "import os; print(os.environ['CUDA_HOME'], os.environ['LD_LIBRARY_PATH'])"
    for variables, home in (({}, "/cache/cuda-12.4"), ({"CUDA_HOME": "/mine"}, "/mine")):
        log = tmp_path / f"cell-{home.replace('/', '')}.log"
        request = LaunchRequest(argv=("-c", code), env={**variables, "LD_LIBRARY_PATH": "/x"},
                                cwd=tmp_path, log=log, work_dir=tmp_path, cases_dir=tmp_path,
                                gpu=None, timeout=60)
        assert backend.launch(built, request).wait() == 0
        assert log.read_text().split() == [home, f"{site / 'nvidia' / 'cublas' / 'lib'}:/x"]
    # Built with the machine's own toolkit: nothing added.
    log = tmp_path / "plain.log"
    request = LaunchRequest(argv=("-c", "import os; print(os.environ.get('LD_LIBRARY_PATH'))"),
                            env={}, cwd=tmp_path, log=log, work_dir=tmp_path,
                            cases_dir=tmp_path, gpu=None, timeout=60)
    assert backend.launch(env, request).wait() == 0
    assert "nvidia" not in log.read_text()


def test_a_package_that_does_not_import_makes_the_environment_an_error(
        tmp_path: Path, wheelhouse: Path) -> None:
    backend = UvBackend(tmp_path / "cache")
    with pytest.raises(EnvImportError) as info:
        backend.realize(spec("broken", ("brokenpkg",), wheelhouse))
    assert "brokenpkg: brokenpkg: ImportError: libfoo.so.1: cannot open shared object" in str(
        info.value)
    # Not marked as built: the next run tries again instead of reusing a broken venv.
    with pytest.raises(EnvImportError):
        backend.realize(spec("broken", ("brokenpkg",), wheelhouse))


def test_a_build_that_needs_another_nvcc_says_so_before_building() -> None:
    def needs(nvcc: str | None, cuda: str | None = None) -> EnvSpec:
        setting = BuildSetting(dist="te-torch", isolation=False, nvcc=nvcc)
        return EnvSpec(name="e", origin="t", values=(), backend="uv", python=PY,
                       requirements=(), pins=(), cuda=cuda, builds=(setting,))

    with pytest.raises(EnvBuildError, match=r"^building te-torch needs nvcc >=99; this machine "
                                            r"has 13.0$"):
        check_nvcc(needs(">=99"), "13.0")
    with pytest.raises(EnvBuildError, match=r"no nvcc on PATH"):
        check_nvcc(needs(">=12.0"), None)
    # torch refuses an extension compiler of another CUDA major than its own build's.
    with pytest.raises(EnvBuildError, match=r"^building te-torch for CUDA 12.4 needs an nvcc "
                                            r"12.x \(torch refuses another major\); this "
                                            r"machine has 13.0$"):
        check_nvcc(needs(">=12.0", cuda="12.4"), "13.0")
    check_nvcc(needs(">=12.0", cuda="12.4"), "12.8")
    check_nvcc(needs(None), None)  # no nvcc asked: nothing to say


def test_the_import_check_keeps_its_answer_apart_from_what_modules_print(
        tmp_path: Path, wheelhouse: Path) -> None:
    make_wheel(tmp_path, "chatty", "1.0", {
        "chatty/__init__.py": "import os\nprint('hello from chatty')\n"
                              "os.write(1, b'and from C code\\n')\n"})
    backend = UvBackend(tmp_path / "cache")
    env = backend.realize(EnvSpec(name="chatty", origin="test", values=(), backend="uv",
                                  python=PY, requirements=("chatty",), pins=(),
                                  find_links=(str(tmp_path),)))
    assert env.built


def test_an_interpreter_uv_cannot_see_is_found_among_pyenvs_versions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.envs.uv import find_interpreter

    for patch in ("9", "10rc1", "10"):
        binary = tmp_path / "versions" / f"3.42.{patch}" / "bin" / "python3.42"
        binary.parent.mkdir(parents=True)
        binary.write_text("")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert find_interpreter("3.42") == str(tmp_path / "versions/3.42.10/bin/python3.42")
    # a patch version: its own folder (was: not found, uv's shims error)
    assert find_interpreter("3.42.9") == str(tmp_path / "versions/3.42.9/bin/python3.42")
    assert find_interpreter("3.43") == "3.43"  # nothing anywhere: uv says so in its own words


def test_an_interpreter_is_asked_of_uv_once_per_version_in_a_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that builds a dozen environments of one Python started uv a dozen times."""
    asked: list[list[str]] = []

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=f"/opt/py{argv[-1]}/bin/python\n")

    uv.uv_environ()  # uv's own release, asked once a process, before anything is watched
    monkeypatch.setattr(uv.subprocess, "run", run)
    assert [uv.find_interpreter(v) for v in ("3.11", "3.11", "3.12", "3.11")] == [
        "/opt/py3.11/bin/python", "/opt/py3.11/bin/python", "/opt/py3.12/bin/python",
        "/opt/py3.11/bin/python"]
    assert [a[-1] for a in asked] == ["3.11", "3.12"]


def test_refresh_rebuilds_once_and_takes_the_newest_release(tmp_path: Path) -> None:
    """A `*` pin resolved once was never looked at again; --refresh rebuilds what was built
    before the run started, once, and the fingerprint says what resolved."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_wheel(folder, "hello-harness", "1.0", {"hello_harness.py": "V = 1\n"})
    backend = UvBackend(tmp_path / "cache")
    unpinned = spec("star", ("hello-harness",), folder)
    first = backend.realize(unpinned)
    assert first.built and first.fingerprint["packages"]["hello-harness"] == "1.0"
    make_wheel(folder, "hello-harness", "2.0", {"hello_harness.py": "V = 2\n"})
    again = backend.realize(unpinned)
    assert not again.built and again.fingerprint["packages"]["hello-harness"] == "1.0"
    refreshing = replace(unpinned, refresh_before=time.time())
    fresh = backend.realize(refreshing)
    assert fresh.built and fresh.fingerprint["packages"]["hello-harness"] == "2.0"
    assert not backend.realize(refreshing).built  # once per run, not once per cell


BROKEN_EXTENSION = """\
from setuptools import Extension, setup
setup(name="brokenext", version="0.1",
      ext_modules=[Extension("brokenext", ["src/deep/inside/brokenext.c"])])
"""


def test_a_failed_source_build_leads_with_the_compilers_first_error(tmp_path: Path) -> None:
    """uv's last lines say only that the build failed; the compiler (here the machine's real
    C compiler) said why, first."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_sdist(folder, "brokenext", "0.1", {
        "setup.py": BROKEN_EXTENSION,
        "src/deep/inside/brokenext.c": "int ok(void) { return 0; }\nint broken(void) { return"
                                       " undeclared_name; }\n"})
    with pytest.raises(EnvBuildError) as raised:
        UvBackend(tmp_path / "cache").realize(spec("broken", ("brokenext",), folder))
    message = str(raised.value)
    assert message.startswith("uv pip failed for broken: "), message
    first = message.splitlines()[0].removeprefix("uv pip failed for broken: ")
    assert first.startswith("deep/inside/brokenext.c:2:"), message
    assert "error: " in first and "undeclared_name" in first


def test_cells_keep_bytecode_in_the_environment_not_beside_the_sources(
        tmp_path: Path, hello: tuple[UvBackend, Environment]) -> None:
    """uv installs no .pyc: a cell that may not write any compiles torch again every time.
    The environment keeps what its processes compiled, in a folder of its own."""
    backend, env = hello
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "mine.py").write_text("X = 1\n")
    request = LaunchRequest(
        argv=("-c", "import hello_harness, mine"), env={"PYTHONPATH": str(cases),
                                                        "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=cases, log=tmp_path / "cell.log", work_dir=tmp_path, cases_dir=cases, gpu=None,
        timeout=60)
    assert backend.launch(env, request).wait() == 0, (tmp_path / "cell.log").read_text()
    compiled = {p.name.split(".")[0] for p in (Path(env.location) / ".pycache").rglob("*.pyc")}
    assert {"hello_harness", "mine"} <= compiled
    assert not list(cases.rglob("__pycache__"))
    assert not list(Path(env.location).glob("lib/python*/site-packages/__pycache__"))


# Every start of an interpreter of the environment, once the wheel is in: a .pth line runs
# at each start, whoever starts it (the harness, uv, a case).
START_COUNTER = ("import os; p = os.environ.get('HARNESS_TEST_STARTS'); "
                 "p and open(p, 'a').write(str(os.getpid()) + chr(10))\n")


def test_a_build_starts_the_environments_interpreter_once_to_check_and_fingerprint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each start imported everything again (seconds, with torch): the import check and the
    fingerprint share one; what it reads is what a later reading of the fingerprint says."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_wheel(folder, "harness-startcount", "1.0", {
        "harness_startcount.pth": START_COUNTER, "harness_startcount/__init__.py": ""})
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("HARNESS_TEST_STARTS", str(starts))
    env = UvBackend(tmp_path / "cache").realize(
        spec("counted", ("harness-startcount==1.0",), folder))
    assert env.built
    # One pid: a sitecustomize that reads site-packages again runs the .pth twice in a start.
    assert len(set(starts.read_text().split())) == 1
    assert env.fingerprint["packages"]["harness-startcount"] == "1.0"
    assert "imports" not in env.fingerprint
    monkeypatch.delenv("HARNESS_TEST_STARTS")
    again = read_fingerprint(env.python)
    assert {k: env.fingerprint[k] for k in again} == again
    # Checking left the bytecode of what it imported for the cells, in the environment.
    assert list((Path(env.location) / ".pycache").rglob("harness_startcount/__init__.*.pyc"))


FAKE_TORCH = """\
import os
IMPORTED_WITH = os.environ.get("CUDA_VISIBLE_DEVICES")
__version__ = "2.5.1+harnesstest"


class version:
    cuda = "12.4"
    hip = None


class backends:
    class cudnn:
        @staticmethod
        def version():
            return 90100


class cuda:
    @staticmethod
    def is_available():
        # The truth where asked (GPU 0 visible), as long as importing saw no GPU.
        return IMPORTED_WITH == "" and os.environ.get("CUDA_VISIBLE_DEVICES") == "0"
"""


def test_the_check_imports_with_no_gpu_and_the_fingerprint_sees_the_machines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing touches no GPU (a build runs beside cells); whether CUDA is available is
    still asked of the GPUs the harness was given, in the same interpreter."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    # A version no index has: uv takes this wheel, never the real torch.
    make_wheel(folder, "torch", "2.5.1+harnesstest", {"torch/__init__.py": FAKE_TORCH})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = UvBackend(tmp_path / "cache").realize(
        spec("gpu", ("torch==2.5.1+harnesstest",), folder))
    assert env.fingerprint["torch"] == {"version": "2.5.1+harnesstest", "cuda": "12.4",
                                        "cudnn": 90100, "hip": None, "cuda_available": True}


def test_an_interpreter_killed_by_an_import_makes_the_environment_an_error(
        tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_wheel(folder, "harness-dies", "1.0", {"harness_dies/__init__.py": "import os\n"
                                                                          "os._exit(3)\n"})
    with pytest.raises(EnvImportError, match=r"^dies was built but does not import: importing "
                                             r"harness-dies killed the interpreter \(exit 3\)"):
        UvBackend(tmp_path / "cache").realize(spec("dies", ("harness-dies==1.0",), folder))


def test_an_environments_folder_tells_its_version_operators_apart(tmp_path: Path) -> None:
    def folder(name: str) -> str:
        spec = EnvSpec(name=name, origin="cpu", values=(), backend="uv", python="3.11",
                       requirements=(), pins=())
        return UvBackend(tmp_path).path_for(spec).name.removesuffix(f"-{spec.key}")

    assert folder("cpu:torch=2.0.1,numpy<2") == "cpu-torch-2.0.1-numpy-lt2"
    assert folder("cpu:torch=2.0.1,numpy>=2") == "cpu-torch-2.0.1-numpy-ge2"
    assert folder("te:transformer_engine~=1.13,flash_attn!=2.5") == (
        "te-transformer-engine-compat1.13-flash-attn-ne2.5")


def test_begin_hands_a_new_environment_over_before_its_check(tmp_path: Path,
                                                             wheelhouse: Path) -> None:
    backend = UvBackend(tmp_path / "cache")
    realizing = backend.begin(spec("hello", ("hello-harness",), wheelhouse))
    assert realizing.checked is not None and realizing.env.built
    assert Path(realizing.env.python).exists() and realizing.env.fingerprint == {}
    checked = realizing.checked.result(timeout=120)
    assert checked.built and checked.fingerprint["key"]["pytest"]
    assert checked.location == realizing.env.location
    # Found: nothing left to wait for.
    again = backend.begin(spec("hello", ("hello-harness",), wheelhouse))
    assert again.checked is None and not again.env.built
    assert again.env.fingerprint == checked.fingerprint
    # What fails before the handover is raised by begin itself.
    with pytest.raises(EnvBuildError, match="uv pip failed for missing"):
        backend.begin(replace(spec("missing", ("harness-no-such-package==9.9",), wheelhouse),
                              offline=True))


def test_a_failed_resolution_says_why_on_its_first_line(tmp_path: Path,
                                                         wheelhouse: Path) -> None:
    # The first line is what the progress line and the report show of the cell's ERROR.
    with pytest.raises(EnvBuildError) as exc:
        UvBackend(tmp_path).realize(replace(spec("gone", ("hello-harness==9.9",), wheelhouse),
                                            offline=True))
    first = str(exc.value).splitlines()[0]
    assert "hello-harness==9.9" in first and "No solution found" in first, first


@pytest.mark.parametrize("lost", ["bin/python", "lib", "pyvenv.cfg"])
def test_an_environment_half_deleted_since_its_build_is_built_again(
        tmp_path: Path, wheelhouse: Path, lost: str) -> None:
    """Its marker alone said built: every cell then failed to start, or without its packages."""
    backend = UvBackend(tmp_path / "cache")
    hello = spec("hello", ("hello-harness",), wheelhouse)
    first = backend.realize(hello)
    gone = Path(first.location) / lost
    if gone.is_dir():
        shutil.rmtree(gone)
    else:
        gone.unlink()
    again = backend.realize(hello)
    assert again.built and run_in(again.python, "import hello_harness; print('ok')") == "ok"


@pytest.mark.parametrize("python", ["3.8", "3.7.16"])
def test_a_python_older_than_the_in_environment_code_is_refused_before_building(
        tmp_path: Path, python: str) -> None:
    """3.8 built, then every cell failed in the plugin ('type' object is not subscriptable);
    3.7 said 'importing six killed the interpreter'."""
    spec = EnvSpec(name="old", origin="test", values=(), backend="uv", python=python,
                   requirements=("six",), pins=())
    with pytest.raises(EnvBuildError, match=rf"^old: Python {python}: the harness runs cells "
                                            r"on Python 3.9 or newer$"):
        UvBackend(tmp_path).realize(spec)
    assert not (tmp_path / "uv" / f"old-{spec.key}").exists()


def test_an_environment_whose_marker_is_unreadable_is_built_again(
        tmp_path: Path, wheelhouse: Path) -> None:
    backend = UvBackend(tmp_path / "cache")
    hello = spec("hello", ("hello-harness",), wheelhouse)
    (Path(backend.realize(hello).location) / uv.MARKER).write_text("{}")
    assert backend.realize(hello).built  # was: backend bug, KeyError: 'fingerprint'
