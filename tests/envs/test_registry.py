"""Images through a registry: pushed by the machine that built them, pulled by the next one.

The docker tests start Debian's ``docker-registry`` (the CNCF distribution registry) on a
loopback port; under CI (``HARNESS_REQUIRE_DOCKER``) a missing one is a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest

from harness.core.errors import BackendError, UsageError
from harness.envs.docker import DockerBackend
from harness.envs.images import REPOSITORY, ImagePlan, ensure_image
from harness.matrix.load import load_matrix, parse_matrix
from harness.matrix.sources import REGISTRY_VAR, with_find_links
from tests.conftest import DATA, write_matrix
from tests.envs.test_docker import client, harness, newest_run, ours, results

__all__ = ["client"]  # the engine fixture, shared with the docker backend's tests

MATRIX = """\
version: 1
cases_dir: {cases}
defaults: {{python: "3.11", timeout: 60}}
environments:
  dock: {{backend: docker, hardware: [cpu], memory: 2g, packages: [{pytest}]}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_registry_reaches_every_environment_and_is_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_matrix(MATRIX.format(cases=DATA / "behaviour", pytest="pytest"),
                        file="m.yaml", base=Path())
    (given,) = with_find_links(spec, (), registry="127.0.0.1:5000/envs").environments
    assert given.registry == "127.0.0.1:5000/envs"
    assert given.key == spec.environments[0].key  # where it comes from, not what it holds
    monkeypatch.setenv(REGISTRY_VAR, "registry.example.com/team/envs")
    assert with_find_links(spec, ()).environments[0].registry == "registry.example.com/team/envs"
    with pytest.raises(UsageError, match=r"'localhost:5000/Envs:v1': not HOST\[:PORT\]/NAME"):
        with_find_links(spec, (), registry="localhost:5000/Envs:v1")


def test_a_registry_that_does_not_answer_is_one_line_naming_it(tmp_path: Path) -> None:
    said = 'Get "http://127.0.0.1:9/v2/": dial tcp 127.0.0.1:9: connect: connection refused'

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise docker.errors.APIError("500 Server Error", explanation=said)

    def missing(tag: str) -> Any:
        raise docker.errors.ImageNotFound(tag)

    engine = SimpleNamespace(images=SimpleNamespace(get=missing),
                             api=SimpleNamespace(pull=refused))
    plan = ImagePlan(tag=f"{REPOSITORY}:0123456789abcdef", base="b", dockerfile="", files=())
    with pytest.raises(BackendError) as raised:
        ensure_image(engine, plan, tmp_path / "log", {}, registry="127.0.0.1:9/envs")
    assert str(raised.value) == f"cannot pull 127.0.0.1:9/envs:0123456789abcdef: {said}"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """A registry of its own on a free loopback port: HOST:PORT/NAME."""
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not Path(binary).is_file():
        if os.environ.get("CI") or os.environ.get("HARNESS_REQUIRE_DOCKER"):
            pytest.fail("CI needs docker-registry (apt-get install docker-registry)")
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {tmp_path / 'blobs'}\nhttp:\n  addr: 127.0.0.1:{port}\n")
    with open(tmp_path / "registry.log", "wb") as log:
        server = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        for _ in range(100):
            try:
                direct.open(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}/harness-test"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.docker
def test_an_image_pushed_once_is_pulled_not_built(tmp_path: Path, client: Any,
                                                  registry: str) -> None:
    # A marker always true, text of its own: an image no other test (or run) has.
    nonce = f'"pytest; platform_release != \'{uuid.uuid4().hex}\'"'
    m = write_matrix(tmp_path / "matrix.yaml", MATRIX.format(cases=DATA / "behaviour",
                                                             pytest=nonce))
    digest = DockerBackend(tmp_path / "cache").listing_key(load_matrix(m).environments[0])
    tag, remote = f"{REPOSITORY}:{digest}", f"{registry}:{digest}"
    cache = {"HARNESS_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str) -> tuple[dict[str, Any], str, list[str]]:
        proc = harness(tmp_path, "run", "-m", str(m), "-k", "test_pass", *args, env=cache)
        run_dir = newest_run(tmp_path)
        (row,) = results(tmp_path)
        origins = [json.loads(p.read_text()).get("provenance") for p in run_dir.glob("envs/*.json")]
        return row, proc.stdout + proc.stderr, origins

    # The builder: `envs build` with a registry builds the image and pushes it.
    built = harness(tmp_path, "envs", "build", "--into", str(tmp_path / "wheels"), "-m", str(m),
                    "--registry", registry, env=cache)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"dock: image built here, pushed to {remote}\n" in built.stdout, built.stdout
    assert f"environment dock: the registry has no {remote}: building here" in built.stderr
    assert "0 wheels built, 0 already there, for 0 environments that build from source; " \
        "1 images; 0 failed" in built.stdout
    try:
        client.images.remove(client.images.get(tag).id, force=True)  # both tags: none is left
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(remote)

        row, said, origins = run("--registry", registry)
        assert row["outcome"] == "PASS", said
        assert "environments: 0 built" in said
        assert origins == [[f"image pulled from {remote}"]]
        _, said, origins = run()  # the image is here now: said so, not "pulled" again
        assert origins == [["image already on this host"]], said

        # A registry that does not answer: one line naming it, for a push and for a pull.
        gone = f"127.0.0.1:{free_port()}/harness-test"
        for verb in ("push", "pull"):  # the image is here, then it is not
            row, said, _ = run("--registry", gone)
            assert row["outcome"] == "ERROR", said
            assert f"cannot {verb} {gone}:{digest}: " in row["reason"]
            assert "connection refused" in row["reason"] and "\n" not in row["reason"]
            with contextlib.suppress(docker.errors.ImageNotFound):
                image = client.images.get(tag)
                assert f"{gone}:{digest}" not in image.tags  # no tag says it was pushed
                client.images.remove(image.id, force=True)
    finally:
        for stale in (tag, remote):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(stale, force=True)
    # No container of this test's image is left (other files' docker tests run beside it).
    assert [c for c in ours(client) if c.attrs["Config"]["Image"] in (tag, remote)] == []
