"""Overlay environments on a base interpreter, built offline from a folder of wheels.

The base is a real venv holding ``basepkg`` and pytest (as a GPU host holds torch and pytest);
the overlay adds ``toppkg``, which needs ``basepkg``, from a local folder, with no index.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec
from harness.envs.uv import UvBackend, uv_environ
from harness.records.store import RunStore
from tests.conftest import PY, ROOT
from tests.packages import make_wheel


def make_folder(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "basepkg", version,
                   {"basepkg/__init__.py": f"VERSION = {version!r}\n"})
    make_wheel(wheels, "toppkg", "1.0", {"toppkg/__init__.py": "import basepkg\n"},
               requires=("basepkg>=1",))
    return wheels


def make_base(tmp_path: Path, folder: Path) -> Path:
    """A base interpreter with basepkg 1.0 and pytest, as a GPU host has torch and pytest."""
    root = tmp_path / "base"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "--quiet", "--python", sys.executable, str(root)],
                   check=True, env=uv_environ())
    install(root, "basepkg==1.0", "pytest", folder=folder)
    return root / "bin" / "python"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


@pytest.fixture
def base(tmp_path: Path, folder: Path) -> Path:
    """A base of the test's own, for the tests that change it."""
    return make_base(tmp_path, folder)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One base and its wheels, for the tests that leave both as they found them."""
    root = tmp_path_factory.mktemp("overlay")
    wheels = make_folder(root)
    return make_base(root, wheels), wheels


def install(root: Path, *requirements: str, folder: Path) -> None:
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python",
                    str(root / "bin" / "python"), f"--find-links={folder}", *requirements],
                   check=True, env=uv_environ())


def overlay(base: Path, folder: Path, *requirements: str) -> EnvSpec:
    return EnvSpec(name="ov", origin="test", values=(), backend="uv", python=PY,
                   requirements=requirements, pins=(), base=str(base),
                   find_links=(str(folder),), offline=True)


def run_in(python: str, code: str) -> str:
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_an_overlay_adds_only_its_own_packages_and_inherits_the_rest(
        tmp_path: Path, shared: tuple[Path, Path]) -> None:
    base, folder = shared
    backend = UvBackend(tmp_path / "cache")
    env = backend.realize(overlay(base, folder, "toppkg"))
    assert env.built
    where = run_in(env.python, "import basepkg, toppkg; print(basepkg.__file__); "
                               "print(toppkg.__file__)").splitlines()
    assert where[0].startswith(str(base.parent.parent))  # inherited, not installed again
    assert where[1].startswith(env.location)
    assert env.fingerprint["packages"]["basepkg"] == "1.0"  # drift sees inherited packages
    own = run_in(env.python, "import importlib.metadata as m, sys; print(sorted("
                             "d.metadata['Name'] for d in m.distributions(path=[p for p in "
                             "sys.path if p.startswith(sys.prefix)])))")
    assert own == "['toppkg']"


def test_an_unchanged_base_rebuilds_nothing_and_a_changed_one_rebuilds_the_overlay(
        tmp_path: Path, base: Path, folder: Path) -> None:
    backend = UvBackend(tmp_path / "cache")
    first = backend.realize(overlay(base, folder, "toppkg"))
    again = backend.realize(overlay(base, folder, "toppkg"))
    assert (first.built, again.built, again.location) == (True, False, first.location)
    install(base.parent.parent, "basepkg==2.0", folder=folder)
    changed = backend.realize(overlay(base, folder, "toppkg"))
    assert changed.built and changed.location != first.location
    assert changed.fingerprint["packages"]["basepkg"] == "2.0"


def test_an_overlay_may_shadow_an_inherited_package_and_says_so(
        tmp_path: Path, shared: tuple[Path, Path]) -> None:
    base, folder = shared
    env = UvBackend(tmp_path / "cache").realize(overlay(base, folder, "basepkg==2.0"))
    assert run_in(env.python, "import basepkg; print(basepkg.VERSION)") == "2.0"
    assert env.fingerprint["packages"]["basepkg"] == "2.0"  # what imports, not what is below
    assert env.summary["overlay"]["shadowed"] == {"basepkg": "1.0 -> 2.0"}


def test_an_overlay_never_replaces_the_bases_torch_stack(tmp_path: Path, base: Path,
                                                         folder: Path) -> None:
    make_wheel(folder, "triton", "3.0.0", {"triton/__init__.py": ""})
    make_wheel(folder, "triton", "3.1.0", {"triton/__init__.py": ""})
    install(base.parent.parent, "triton==3.0.0", folder=folder)
    with pytest.raises(EnvBuildError, match=r"^ov asks for triton==3.1.0 \(the base has triton "
                                            r"3.0.0\): an overlay never replaces its base's "
                                            r"torch or CUDA stack$"):
        UvBackend(tmp_path / "cache").realize(overlay(base, folder, "triton==3.1.0"))


def test_offline_a_missing_wheel_is_an_error_that_names_it(
        tmp_path: Path, shared: tuple[Path, Path]) -> None:
    base, folder = shared
    lead = re.escape(f"ov does not fit on its base {base}: ")
    with pytest.raises(EnvBuildError, match=rf"^{lead}(.|\n)*nothere was not found in the "
                                            r"provided package locations"):
        UvBackend(tmp_path / "cache").realize(overlay(base, folder, "toppkg", "nothere"))


CASE = '''\
def test_sees_all():
    import basepkg, six, toppkg
    assert basepkg.VERSION == "1.0" and six.__version__ == "1.16.0"
'''


def harness(tmp_path: Path, *args: str, netns: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(["unshare", "--net"] if netns else []), sys.executable, "-m", "harness",
         "--reports", str(tmp_path / "reports"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(tmp_path / "c")})


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace (unshare -n)")
def test_a_wheelhouse_then_a_run_with_no_network_at_all(
        tmp_path: Path, shared: tuple[Path, Path]) -> None:
    """``harness wheelhouse`` gathers what the overlays add (six from PyPI, toppkg from a
    folder; not what the base has); then the whole run happens in a network namespace with
    nothing but loopback: the overlay builds from the wheelhouse, its case runs, and the
    environment that needs a wheel the wheelhouse lacks is ERROR, naming it."""
    base, folder = shared
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "test_overlay_case.py").write_text(CASE)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"""\
version: 1
cases_dir: {cases}
defaults: {{python: "{PY}", base: "{base}", hardware: [cpu]}}
environments:
  fits: {{packages: ["toppkg", "six==1.16.0"]}}
  lacks: {{packages: ["toppkg", "six==1.16.0", "nothere"]}}
""")
    wheelhouse = tmp_path / "wheelhouse"
    made = harness(tmp_path, "wheelhouse", str(wheelhouse), "-m", str(matrix), "--env", "fits",
                   "--find-links", str(folder))
    assert made.returncode == 0, made.stdout + made.stderr[-2000:]
    wheels = ["six-1.16.0-py2.py3-none-any.whl", "toppkg-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in wheelhouse.iterdir()) == [
        "index.html", *wheels, "wheel-keys.json"]  # the page a find-links URL reads
    assert all(f'<a href="{w}">' in (wheelhouse / "index.html").read_text() for w in wheels)

    run = harness(tmp_path, "run", "-m", str(matrix), "--offline", "--find-links",
                  str(wheelhouse), "--jobs", "1", netns=True)
    results = {r.environment: r for r in RunStore.open(tmp_path / "reports", "latest").results()}
    assert run.returncode == 1, run.stderr[-2000:]
    assert results["fits"].outcome == "PASS", results["fits"].reason
    assert results["lacks"].outcome == "ERROR"
    assert "nothere was not found in the provided package locations" in results["lacks"].reason


def test_a_wheelhouse_says_what_it_could_not_get(tmp_path: Path, folder: Path) -> None:
    (tmp_path / "matrix.yaml").write_text(f"""\
version: 1
defaults: {{python: "{PY}"}}
environments:
  git: {{packages: ["pkg @ git+https://nowhere.invalid/o/pkg@abc"]}}
""")
    (tmp_path / "cases").mkdir()
    made = harness(tmp_path, "wheelhouse", str(tmp_path / "wh"), "-m",
                   str(tmp_path / "matrix.yaml"))
    assert made.returncode == 1
    assert made.stdout.startswith("git: error: Failed to download and build `pkg @")


def test_the_bases_own_pth_files_work_in_the_overlay(tmp_path: Path, base: Path,
                                                     folder: Path) -> None:
    """Editable installs (and NGC's extra paths) reach the base through .pth files."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "extramod.py").write_text("WHERE = 'extra'\n")
    purelib = run_in(str(base), "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(purelib) / "extra.pth").write_text(f"{extra}\n")
    env = UvBackend(tmp_path / "cache").realize(overlay(base, folder, "toppkg"))
    assert run_in(env.python, "import extramod; print(extramod.WHERE)") == "extra"


def test_a_base_version_that_is_not_pep_440_is_left_to_the_base(tmp_path: Path) -> None:
    from harness.envs.overlay import resolution_args

    args = resolution_args({"distro-info": "1.1build1", "six": "1.16.00"}, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.whl")) == ["six-1.16.0-py3-none-any.whl"]
    assert (tmp_path / "resolved.txt").read_text() == "six==1.16.0\n"
    assert args[-2:] == ["--output-file", str(tmp_path / "resolved.txt")]


def test_an_overlay_on_this_machines_own_python3(tmp_path: Path, folder: Path) -> None:
    """``base: host``: the machine's python3 outside any virtualenv (these tests may run in
    one), with whatever it holds; the overlay inherits all of it and adds its own."""
    from harness.envs.overlay import find_base

    host = find_base("host")
    assert not host.python.startswith(sys.prefix) or sys.prefix == sys.base_prefix
    spec = overlay(Path("host"), folder, "toppkg", "basepkg==2.0")
    env = UvBackend(tmp_path / "cache").realize(spec)
    inherited = set(host.packages) - {"toppkg", "basepkg"}
    assert inherited <= set(env.fingerprint["packages"])
    assert env.fingerprint["python"] == host.fingerprint["python"]
    assert run_in(env.python, "import toppkg, basepkg; print(basepkg.VERSION)") == "2.0"


def test_host_named_by_harness_host_python_even_inside_a_virtualenv(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An image whose python3 is a virtualenv's (the lent H100's /opt/torch/.venv): the harness
    runs under it, so `host` would skip it for the next python3 on PATH; the variable says."""
    from harness.envs.overlay import _interpreter

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python3 = str(venv / "bin" / "python3")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert _interpreter("host") != python3
    monkeypatch.setenv("HARNESS_HOST_PYTHON", python3)
    assert _interpreter("host") == python3


@pytest.mark.parametrize(("script", "said"), [
    ("echo Welcome to the cluster", r"base interpreter \S+ does not run: exit 0: "
                                    r"Welcome to the cluster"),
    ("echo 'SyntaxError: invalid syntax' >&2; exit 1", r"base interpreter \S+ does not run: "
                                                       r"exit 1: SyntaxError: invalid syntax"),
    ("echo '[[3, 8, 18], []]'", r"base interpreter \S+ is Python 3.8: the harness runs cells "
                                r"on Python 3.9 or newer")])
def test_a_base_that_is_not_a_python_it_can_use_is_one_line(
        tmp_path: Path, script: str, said: str) -> None:
    """A wrapper printing a banner was a backend bug (JSONDecodeError); Python 2 said its
    whole command line; 3.8 built, then failed in every cell."""
    from harness.envs.overlay import find_base

    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    with pytest.raises(EnvBuildError, match=f"^{said}$"):
        find_base(str(python))
