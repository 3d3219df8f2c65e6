"""Docker images for environments: a Dockerfile from a template, tagged by a hash of it and
the files it copies, built once; and a debootstrap base image for hosts with no registry."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from harness.core.errors import BackendError, EnvBuildError, UsageError, one_line
from harness.core.matrix import EnvSpec, requirement_name
from harness.envs.sourcebuild import build_requirements, no_isolation_args
from harness.envs.uv import PYTEST_REQUIREMENT, index_args

TEMPLATES = Path(__file__).resolve().parents[2] / "images"
REPOSITORY = "ml-compat-harness/env"
LOCAL_BASE = "ml-compat-harness/base:bookworm"
LABEL = "ml-compat-harness"
#: CUDA release -> the full nvidia/cuda tag that carries it (cudnn, devel, Ubuntu 22.04).
CUDA_BASES = {"11.8": "11.8.0", "12.1": "12.1.1", "12.2": "12.2.2", "12.4": "12.4.1",
              "12.6": "12.6.3", "12.8": "12.8.1"}
#: Where a TLS-intercepting proxy's CA usually is; HARNESS_CA_BUNDLE overrides.
CA_CANDIDATES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """A rendered build: the Dockerfile text, the files it copies, and the tag they hash to."""

    tag: str
    base: str
    dockerfile: str
    files: tuple[tuple[str, Path], ...]  # name in the build context -> file on this machine


def base_image(spec: EnvSpec) -> str:
    """``image:`` when the spec names one (an NGC PyTorch tag, say), else by CUDA version."""
    if spec.image:
        return spec.image
    if spec.cuda and spec.cuda != "cpu":
        release = CUDA_BASES.get(spec.cuda, f"{spec.cuda}.0")
        return f"nvidia/cuda:{release}-cudnn-devel-ubuntu22.04"
    return LOCAL_BASE


def plan_image(spec: EnvSpec, *, uv_binary: Path, ca_bundle: Path) -> ImagePlan:
    command = ["uv", "pip", "install", "--python", "/opt/env/bin/python",
               *index_args(spec.index_urls)]
    # What a source build compiles against goes lowest, after torch; the layers above build
    # without isolation, with the build's variables (MAX_JOBS) on their RUN line only.
    below = _torch_first(tuple(build_requirements(spec)))
    prefix = "".join(f"{k}={shlex.quote(v)} " for b in spec.source_builds for k, v in b.env)
    ordered = list(dict.fromkeys([*below, *_torch_first(spec.requirements), PYTEST_REQUIREMENT]))
    # Cumulative: a later package cannot move an earlier pin; equal prefixes share layers.
    layers = ["RUN " + shlex.join([*command, *ordered[:n]]) for n in range(1, len(below) + 1)]
    layers += [f"RUN {prefix}" + shlex.join([*command, *no_isolation_args(spec), *ordered[:n]])
               for n in range(len(below) + 1, len(ordered) + 1)]
    # CUDA images (Ubuntu) may lack the Python asked for.
    setup = (f"command -v python{spec.python} >/dev/null || (apt-get update && "
             "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
             f"python{spec.python} && rm -rf /var/lib/apt/lists/*)")
    base = base_image(spec)
    text = Template((TEMPLATES / "env.Dockerfile").read_text()).substitute(
        base=base, python=spec.python, python_setup=setup, install_layers="\n".join(layers))
    files = (("uv", uv_binary), ("ca.pem", ca_bundle))
    digest = hashlib.sha256(text.encode())
    for name, path in files:
        stat = path.stat()
        digest.update(name.encode() + b"\0" + _sha256(path, stat.st_mtime, stat.st_size).encode())
    return ImagePlan(tag=f"{REPOSITORY}:{digest.hexdigest()[:16]}", base=base, dockerfile=text,
                     files=files)


def _torch_first(requirements: tuple[str, ...]) -> list[str]:
    """torch is the heaviest layer and the one most environments share: put it lowest."""
    torch = [r for r in requirements if requirement_name(r) == "torch"]
    return torch + [r for r in requirements if r not in torch]


@functools.cache
def _sha256(path: Path, _mtime: float, _size: int) -> str:  # hashed once while unchanged
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_ca_bundle() -> Path:
    for candidate in (os.environ.get("HARNESS_CA_BUNDLE"), os.environ.get("SSL_CERT_FILE"),
                      *CA_CANDIDATES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise EnvBuildError("no CA bundle found; set HARNESS_CA_BUNDLE to a PEM file")


def find_uv_binary() -> Path:
    """The uv executable itself (an ELF, never a pyenv or asdf shim), to copy into images."""
    candidates: list[str] = []
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin

        candidates.append(find_uv_bin())
    found = shutil.which("uv")
    if found:
        candidates.append(found)
    for candidate in candidates:
        path = Path(candidate).resolve()
        with contextlib.suppress(OSError), open(path, "rb") as fh:
            if fh.read(4) == b"\x7fELF":  # images are Linux
                return path
    if candidates:
        raise EnvBuildError("no uv binary to copy into images: " + ", ".join(candidates)
                            + " are scripts (shims); pip install uv")
    raise EnvBuildError("uv is not installed (pip install uv)")


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    tag: str
    built: bool
    steps: int = 0
    cached_steps: int = 0
    rebuilt: tuple[str, ...] = ()  # the Dockerfile instructions that ran (not from cache)
    seconds: float = 0.0
    remote: str = ""  # REGISTRY:TAG, with a registry
    pulled: bool = False
    pushed: bool = False

    @property
    def origin(self) -> list[str]:
        """Where the image came from, for its fingerprint."""
        where = (f"image pulled from {self.remote}" if self.pulled else
                 "image built here" if self.built else "image already on this host")
        return [where + (f", pushed to {self.remote}" if self.pushed else "")]


def ensure_image(client: Any, plan: ImagePlan, log_path: Path, labels: dict[str, str],
                 *, refresh_before: float | None = None, registry: str | None = None
                 ) -> BuildReport:
    """Build ``plan`` unless its tag exists (built after ``refresh_before``), its log to
    ``log_path``; with ``registry``, pulled from there, else built and pushed there."""
    import docker.errors

    remote = f"{registry}:{plan.tag.rsplit(':', 1)[1]}" if registry else ""
    try:
        image = client.images.get(plan.tag)
        built_at = float(image.labels.get(f"{LABEL}.built_at", 0) or 0)
        if refresh_before is None or built_at >= refresh_before:
            # A pull or a push leaves the remote tag: without it, the registry lacks the image.
            pushed = bool(remote) and remote not in image.tags and transfer(
                client, "push", remote, plan.tag)
            return BuildReport(tag=plan.tag, built=False, remote=remote, pushed=pushed)
    except docker.errors.ImageNotFound:
        pass
    if remote and refresh_before is None:
        if transfer(client, "pull", remote, plan.tag):
            return BuildReport(tag=plan.tag, built=False, remote=remote, pulled=True)
        print(f"environment {labels.get(f'{LABEL}.env', plan.tag)}: the registry has no "
              f"{remote}: building here", file=sys.stderr, flush=True)
    labels = {**labels, f"{LABEL}.built_at": f"{time.time():.3f}"}
    try:
        client.images.get(plan.base)
    except docker.errors.ImageNotFound:
        hint = " (run: harness images bootstrap)" if plan.base == LOCAL_BASE else ""
        raise EnvBuildError(f"base image {plan.base} is not on this host{hint}") from None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started, steps, cached, rebuilt, current = time.monotonic(), 0, 0, [], ""
    with tempfile.TemporaryDirectory(prefix="harness-build-") as tmp, \
            open(log_path, "w", encoding="utf-8") as log:
        (Path(tmp) / "Dockerfile").write_text(plan.dockerfile)
        for name, source in plan.files:
            shutil.copy2(source, Path(tmp) / name)
        # Host networking: the build reaches the index as this host does (its proxy).
        for chunk in client.api.build(path=tmp, tag=plan.tag, rm=True, forcerm=True,
                                      decode=True, pull=False, network_mode="host",
                                      labels=labels, nocache=refresh_before is not None):
            text = chunk.get("stream", "")
            log.write(text + (chunk["error"] + "\n" if "error" in chunk else ""))
            log.flush()  # a hung build shows how far it got
            if "error" in chunk:
                said = [ln for ln in log_path.read_text(errors="replace").splitlines()
                        if ln.strip()]
                raise EnvBuildError(f"image build failed ({log_path}): " + " | ".join(said[-6:]))
            if text.startswith("Step "):
                steps += 1
                current = text.split(" : ", 1)[-1].strip()
                if not current.startswith("FROM "):  # referenced, not built
                    rebuilt.append(current)
            elif "Using cache" in text and rebuilt and rebuilt[-1] == current:
                cached += 1
                rebuilt.pop()
    return BuildReport(tag=plan.tag, built=True, steps=steps, cached_steps=cached,
                       rebuilt=tuple(rebuilt), seconds=round(time.monotonic() - started, 1),
                       remote=remote, pushed=bool(remote) and transfer(client, "push", remote,
                                                                       plan.tag))


def transfer(client: Any, verb: str, remote: str, tag: str) -> bool:
    """Pull ``remote`` as ``tag`` or push ``tag`` as ``remote``; False when the registry lacks
    it, a one-line BackendError when it fails."""
    import docker.errors

    repository, _, version = remote.rpartition(":")
    if verb == "push":
        client.api.tag(tag, repository, version)
    said = ""
    try:
        for chunk in getattr(client.api, verb)(repository, tag=version, stream=True,
                                               decode=True):
            said = chunk.get("error") or said
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        said = str(exc.explanation or exc)
    if said:
        if verb == "push":  # the remote tag says the registry has the image: not so
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_image(remote)
        raise BackendError(one_line(f"cannot {verb} {remote}: {said}"))
    if verb == "pull":
        client.api.tag(remote, *tag.rsplit(":", 1))
    return True


def bootstrap_base(client: Any, *, tag: str = LOCAL_BASE, suite: str = "bookworm",
                   mirror: str = "http://deb.debian.org/debian", force: bool = False) -> str:
    """A minimal Debian with Python and CA certificates, for hosts that cannot pull images."""
    import docker.errors

    if not force:
        try:
            client.images.get(tag)
            return f"{tag} already exists (use --force to rebuild it)"
        except docker.errors.ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise UsageError("debootstrap is not installed (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="harness-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3,ca-certificates", suite,
             str(rootfs), mirror], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise EnvBuildError("debootstrap failed: " + " | ".join(
                (proc.stderr or proc.stdout).strip().splitlines()[-4:]))
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
        repository, _, version = tag.partition(":")
        client.api.import_image_from_file(str(archive), repository=repository,
                                          tag=version or "latest")
    return f"{tag} imported from debootstrap {suite} ({mirror})"
