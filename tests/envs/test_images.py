"""Rendering and tagging docker images (pure logic: no engine needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError
from harness.envs.images import LOCAL_BASE, base_image, plan_image
from harness.matrix.load import parse_matrix

MATRIX = """\
version: 1
environments:
  e:
    backend: docker
    python: "3.11"
{extra}    pins: {{{pins}}}
"""


def spec(pins: str, extra: str = ""):  # type: ignore[no-untyped-def]
    return parse_matrix(MATRIX.format(pins=pins, extra=extra), file="m.yaml",
                        base=Path()).environments[0]


def plan(tmp_path: Path, pins: str, extra: str = ""):  # type: ignore[no-untyped-def]
    uv, ca = tmp_path / "uv", tmp_path / "ca.pem"
    if not uv.exists():
        uv.write_bytes(b"uv")
        ca.write_text("CA")
    return plan_image(spec(pins, extra), uv_binary=uv, ca_bundle=ca)


def test_torch_is_the_lowest_layer_and_layers_are_cumulative(tmp_path: Path) -> None:
    text = plan(tmp_path, 'six: "1.16.0", torch: "2.0.1"').dockerfile
    runs = [ln for ln in text.splitlines() if ln.startswith("RUN uv pip install")]
    assert runs[0].endswith("torch==2.0.1")
    assert runs[1].endswith("torch==2.0.1 six==1.16.0")
    assert runs[-1].endswith("'pytest>=7'")


def test_tag_depends_on_content_and_on_the_copied_files(tmp_path: Path) -> None:
    a = plan(tmp_path, 'six: "1.16.0"')
    assert plan(tmp_path, 'six: "1.16.0"').tag == a.tag
    assert plan(tmp_path, 'six: "1.17.0"').tag != a.tag
    (tmp_path / "ca.pem").write_text("another CA")
    assert plan(tmp_path, 'six: "1.16.0"').tag != a.tag


def test_base_image_by_image_then_cuda_then_local(tmp_path: Path) -> None:
    assert base_image(spec('six: "1"')) == LOCAL_BASE
    assert base_image(spec('six: "1"', '    cuda: "12.4"\n')) == (
        "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04")
    ngc = '    image: "nvcr.io/nvidia/pytorch:24.05-py3"\n'
    assert base_image(spec('six: "1"', ngc)) == "nvcr.io/nvidia/pytorch:24.05-py3"


def test_the_ca_bundle_lands_where_ca_certificates_does_not_write(tmp_path: Path) -> None:
    text = plan(tmp_path, 'six: "1.16.0"').dockerfile
    assert "COPY ca.pem /usr/local/share/ml-compat-harness/ca.pem" in text
    assert "SSL_CERT_FILE=/usr/local/share/ml-compat-harness/ca.pem" in text
    assert "PIP_CERT=/usr/local/share/ml-compat-harness/ca.pem" in text


def test_a_source_build_gets_its_requirements_first_and_no_isolation() -> None:
    from harness.core.matrix import BuildSetting, EnvSpec

    setting = BuildSetting(dist="transformer-engine-torch", via=("transformer-engine",),
                           isolation=False, requires=("torch", "pybind11"),
                           env=(("MAX_JOBS", "4"),))
    spec = EnvSpec(name="te", origin="t", values=(), backend="docker", python="3.11",
                   requirements=("transformer-engine[pytorch]==2.2.0", "torch==2.5.1"),
                   pins=(), builds=(setting,))
    plan = plan_image(spec, uv_binary=Path(__file__), ca_bundle=Path(__file__))
    runs = [line for line in plan.dockerfile.splitlines() if "uv pip install" in line]
    install = "uv pip install --python /opt/env/bin/python"
    flags = "--no-build-isolation-package transformer-engine-torch"
    # What the build compiles against goes lowest, as plain layers: the torch layer stays the
    # same as in images without source builds, so they share it.
    assert runs[:2] == [f"RUN {install} torch==2.5.1", f"RUN {install} torch==2.5.1 pybind11"]
    assert runs[2:] == [
        f"RUN MAX_JOBS=4 {install} {flags} torch==2.5.1 pybind11 "
        "'transformer-engine[pytorch]==2.2.0'",
        f"RUN MAX_JOBS=4 {install} {flags} torch==2.5.1 pybind11 "
        "'transformer-engine[pytorch]==2.2.0' 'pytest>=7'"]


def test_a_uv_shim_on_path_is_not_copied_into_images(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pyenv and asdf put a shell script named uv first on PATH; copied into an image, it
    finds no uv there and every build fails."""
    from harness.envs.images import find_uv_binary

    shim = tmp_path / "uv"
    shim.write_text("#!/usr/bin/env bash\nexec pyenv exec uv \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    found = find_uv_binary()
    assert found != shim and found.read_bytes()[:4] == b"\x7fELF"


class _FakeEngine:
    """What ensure_image asks of a Docker client: the base is there, the tag is not, and the
    build streams ``chunks``."""

    def __init__(self, base: str, chunks: list[dict[str, str]]) -> None:
        self.base, self.chunks = base, chunks
        self.built: list[dict[str, object]] = []
        self.images, self.api = self, self

    def get(self, tag: str) -> object:
        import docker.errors

        if tag != self.base:
            raise docker.errors.ImageNotFound(tag)
        return object()

    def build(self, **options: object) -> list[dict[str, str]]:
        self.built.append(options)
        return self.chunks


def test_a_build_reports_its_steps_from_cache_and_its_log(tmp_path: Path) -> None:
    from harness.envs.images import ensure_image

    built = plan(tmp_path, 'six: "1.16.0"')
    engine = _FakeEngine(built.base, [
        {"stream": "Step 1/3 : FROM base\n"}, {"stream": "Step 2/3 : RUN a\n"},
        {"stream": " ---> Using cache\n"}, {"stream": "Step 3/3 : RUN b\n"},
        {"stream": "b ran\n"}])
    report = ensure_image(engine, built, tmp_path / "logs" / "b.log", {"x": "1"})
    assert (report.built, report.steps, report.cached_steps, report.rebuilt) == (
        True, 3, 1, ("RUN b",))
    assert "b ran" in (tmp_path / "logs" / "b.log").read_text()
    assert engine.built[0]["nocache"] is False and engine.built[0]["tag"] == built.tag

    engine.chunks = [{"stream": "Step 1/2 : RUN c\n"}, {"error": "c: not found"}]
    with pytest.raises(EnvBuildError, match=r"image build failed .*Step 1/2 : RUN c \| c: not"):
        ensure_image(engine, built, tmp_path / "logs" / "c.log", {})
