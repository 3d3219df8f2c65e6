"""Docker: one content-addressed image per environment, a fresh container per cell (cases
read-only, its own variables and GPU, no network unless asked, a memory limit)."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.core.errors import BackendError, DriftError, InfraError
from harness.core.matrix import EnvSpec
from harness.core.paths import INENV_DIR
from harness.envs import images
from harness.envs.base import FINGERPRINT_SCRIPT, Backend, Environment, Handover, LaunchRequest
from harness.envs.images import LABEL

CASES, INENV, RUN = "/harness/cases", "/harness/inenv", "/harness/run"
PYTHON = "/opt/env/bin/python"
DEFAULT_MEMORY = "16g"


def connect() -> Any:
    """A Docker client that answers, or a one-line BackendError saying why not."""
    try:
        import docker
    except ImportError:
        raise BackendError("the docker backend needs the docker package "
                           "(pip install 'ml-compat-harness[docker]')") from None
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # docker raises several unrelated types for "no engine"
        raise BackendError(f"no Docker engine answers: {exc}") from exc
    return client


class DockerBackend(Backend):
    name = "docker"

    @functools.cached_property
    def client(self) -> Any:
        return connect()

    def _locate(self, spec: EnvSpec) -> images.ImagePlan:
        return images.plan_image(spec, uv_binary=images.find_uv_binary(),
                                 ca_bundle=images.find_ca_bundle())

    def _build_dir(self, place: images.ImagePlan) -> Path:
        return self.root / place.tag.rsplit(":", 1)[1]  # named for its lock: the image is Docker's

    def _find(self, spec: EnvSpec, place: images.ImagePlan) -> None:
        return None  # Docker knows its images: ensure_image builds only what is missing

    def _build(self, spec: EnvSpec, plan: images.ImagePlan, handover: Handover | None = None
               ) -> Environment:
        digest = plan.tag.rsplit(":", 1)[1]
        report = images.ensure_image(self.client, plan, self.root / "logs" / f"{digest}.log",
                                     {LABEL: "1", f"{LABEL}.env": spec.name[:200],
                                      f"{LABEL}.key": spec.key},
                                     refresh_before=spec.refresh_before,
                                     registry=spec.registry)
        fingerprint = self._fingerprint(plan.tag, self.root / f"{digest}.json", report)
        return Environment(spec=spec, location=plan.tag, python=PYTHON,
                           fingerprint=fingerprint, built=report.built)

    def _fingerprint(self, tag: str, cache: Path, report: images.BuildReport
                     ) -> dict[str, Any]:
        """What is installed, read in a container of the image (cached per image until it is
        built, pulled or pushed again), and where the image came from."""
        if cache.is_file() and not (report.built or report.pulled or report.pushed):
            cached: dict[str, Any] = json.loads(cache.read_text())
            return {**cached, "provenance": report.origin}  # where it came from this time
        script = f"{INENV}/{FINGERPRINT_SCRIPT.name}"
        container = None
        try:
            container = self.client.containers.create(
                tag, [PYTHON, script], network_disabled=True, labels={LABEL: "1"},
                volumes={str(INENV_DIR): {"bind": INENV, "mode": "ro"}})
            container.start()
            code = container.wait(timeout=600).get("StatusCode")
            out = container.logs(stdout=True, stderr=False)
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
        except Exception as exc:
            raise DriftError(f"cannot fingerprint image {tag}: {exc}") from exc
        finally:
            if container is not None:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
        if code != 0:
            raise DriftError(f"cannot fingerprint image {tag}: "
                             + " | ".join(err.strip().splitlines()[-3:]))
        data: dict[str, Any] = {**json.loads(out), "provenance": report.origin}
        atomic.write_text(cache, json.dumps(data, indent=1))
        return data

    def create(self, env: Environment, request: LaunchRequest) -> Any:
        """The container for one cell, created but not started (tests inspect it)."""
        import docker.types

        paths = {str(request.cases_dir): CASES, str(INENV_DIR): INENV, str(request.work_dir): RUN}
        environment = {key: _translate(value, paths) for key, value in request.env.items()}
        # Inside the container the one GPU it was given is device 0.
        environment["CUDA_VISIBLE_DEVICES"] = "" if request.gpu is None else "0"
        devices = [] if request.gpu is None else [docker.types.DeviceRequest(
            device_ids=[str(request.gpu)], capabilities=[["gpu"]])]
        try:
            return self.client.containers.create(
                env.location, [PYTHON, *(_translate(a, paths) for a in request.argv)],
                working_dir=CASES, environment=environment, detach=True,
                volumes={**{str(m): {"bind": str(m), "mode": "ro"} for m in request.mounts},
                         **({str(request.queue): {"bind": str(request.queue), "mode": "rw"}}
                            if request.queue else {}),
                         **{host: {"bind": inside, "mode": "rw" if inside == RUN else "ro"}
                            for host, inside in paths.items()}},
                network_disabled=not env.spec.network, mem_limit=env.spec.memory or DEFAULT_MEMORY,
                # No swap: past the limit the kernel kills the cell (out of memory).
                memswap_limit=env.spec.memory or DEFAULT_MEMORY,
                device_requests=devices, init=True,
                labels={LABEL: "1", f"{LABEL}.cell": environment.get("HARNESS_CELL_ID", ""),
                        f"{LABEL}.work": str(request.work_dir)})
        except Exception as exc:
            raise InfraError(f"cannot create a container from {env.location}: {exc}") from exc

    def launch(self, env: Environment, request: LaunchRequest) -> ContainerProcess:
        container = self.create(env, request)
        try:
            container.start()
        except Exception as exc:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise InfraError(f"cannot start a container from {env.location}: {exc}") from exc
        return ContainerProcess(container, request.log)

    def listing_key(self, spec: EnvSpec) -> str:
        # A digest of what builds the image: environments the image does not tell apart share it.
        return self._locate(spec).tag.rsplit(":", 1)[1]

    def remove_location(self, location: str) -> None:
        with contextlib.suppress(Exception):
            self.client.images.remove(location)

    def listing(self) -> list[dict[str, Any]]:
        try:
            found = self.client.images.list(filters={"label": f"{LABEL}=1"})
        except BackendError:
            return []
        return [{"backend": self.name, "name": image.labels.get(f"{LABEL}.env", ""),
                 "key": tag.rsplit(":", 1)[1], "location": tag,
                 "built_at": image.attrs.get("Created")}
                for image in found for tag in image.tags]


class ContainerProcess:
    """A container as a ``Process``: its exit code, logs and removal in one place."""

    def __init__(self, container: Any, log: Path) -> None:
        self.container = container
        self.log = log
        self.code: int | None = None
        self.oom_killed = False

    def poll(self) -> int | None:
        if self.code is not None:
            return self.code
        try:
            self.container.reload()
        except Exception as exc:  # gone under us (docker rm -f), or the engine is down
            self._discard()
            raise InfraError(f"the cell's container vanished or the Docker engine stopped "
                             f"answering: {type(exc).__name__}: {exc}") from exc
        if self.container.status in ("exited", "dead"):
            return self._finish(int(self.container.attrs["State"]["ExitCode"]))
        return None

    def kill(self) -> None:
        if self.code is None:
            with contextlib.suppress(Exception):
                self.container.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        if self.code is not None:
            return self.code
        try:
            # The client's own read timeout bounds a wait with none: the engine must answer.
            status = self.container.wait(timeout=timeout if timeout is not None else 3600)
        except Exception as exc:
            if timeout is not None and _timed_out(exc):
                return self.poll()  # the deadline passed (or it exited right then)
            self._discard()
            raise InfraError("the Docker engine did not report the container's end within an "
                             "hour" if _timed_out(exc) else "the Docker engine stopped answering "
                             f"about the cell's container: {type(exc).__name__}: {exc}") from exc
        return self._finish(int(status.get("StatusCode", 128 + signal.SIGKILL)))

    def _discard(self) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def _finish(self, status: int) -> int:
        with contextlib.suppress(Exception):
            self.container.reload()
            self.oom_killed = bool(self.container.attrs["State"].get("OOMKilled"))
        with contextlib.suppress(Exception), open(self.log, "ab") as log:
            log.write(self.container.logs(stdout=True, stderr=True))
        self._discard()
        # docker-init (tini) says 128+N for a child killed by signal N; subprocess says -N.
        self.code = -(status - 128) if 128 < status < 160 else status
        return self.code


def _translate(value: str, paths: dict[str, str]) -> str:
    for host, inside in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        value = value.replace(host, inside)
    return value


def _timed_out(exc: BaseException) -> bool:
    """requests raises ReadTimeout, or ConnectionError around urllib3's ReadTimeoutError."""
    seen: BaseException | None = exc
    while seen is not None:
        if "timeout" in type(seen).__name__.lower() or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False
