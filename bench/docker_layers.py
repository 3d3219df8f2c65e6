"""Docker environments: what an unchanged re-run costs, and what a one-package change rebuilds.

Prints (1) the seconds ``DockerBackend.realize`` takes to decide that an existing image needs
no build, and (2) for a spec that differs in one package, which Dockerfile steps ran again
(the rest came from the layer cache). Needs a Docker engine and the local base image
(``harness images bootstrap``).

    python bench/docker_layers.py [--torch 2.0.1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.core.matrix import EnvSpec
from harness.envs import images
from harness.envs.docker import DockerBackend
from harness.matrix.load import parse_matrix

MATRIX = """\
version: 1
environments:
  bench:
    backend: docker
    python: "3.11"
    pins: {{{pins}}}
"""


def spec_for(pins: dict[str, str]) -> EnvSpec:
    body = MATRIX.format(pins=", ".join(f'{k}: "{v}"' for k, v in pins.items()))
    return parse_matrix(body, file="bench.yaml", base=Path()).environments[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--torch", default=None, help="add a torch pin (a heavy lower layer)")
    args = parser.parse_args()
    pins = {"torch": args.torch} if args.torch else {}
    pins |= {"packaging": "24.0", "six": "1.16.0", "tomli": "2.0.1"}
    with tempfile.TemporaryDirectory() as tmp:
        backend = DockerBackend(Path(tmp))

        def build(spec: EnvSpec) -> images.BuildReport:
            return images.ensure_image(backend.client, backend._locate(spec),
                                       Path(tmp) / "build.log", {})

        report = build(spec_for(pins))
        first = backend.realize(spec_for(pins))
        print(f"first build: built={report.built} ({report.seconds} s, {report.steps} steps); "
              f"realized: {first.fingerprint['provenance']}")
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            again = backend.realize(spec_for(pins))
            timings.append(time.perf_counter() - start)
            assert not again.built
        print(f"unchanged environment: no build needed, decided in "
              f"{statistics.median(timings) * 1000:.0f} ms (median of 5)")
        report = build(spec_for({**pins, "six": "1.17.0"}))
        print(f"one package changed (six 1.16.0 -> 1.17.0): built={report.built}, "
              f"{report.cached_steps} of {report.steps} steps from cache, rebuilt:")
        for step in report.rebuilt:
            print(f"  {step}")


if __name__ == "__main__":
    main()
