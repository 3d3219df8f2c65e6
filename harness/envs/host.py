"""The host backend: the harness's own interpreter, as it is. Nothing is installed."""

from __future__ import annotations

import sys

from harness.core.matrix import EnvSpec
from harness.envs.base import (
    Backend,
    Environment,
    LaunchRequest,
    Process,
    launch_local,
    read_fingerprint,
)


class HostBackend(Backend):
    name = "host"

    def _find(self, spec: EnvSpec, place: None) -> Environment:
        return Environment(spec=spec, location=sys.prefix, python=sys.executable,
                           fingerprint=read_fingerprint(sys.executable))

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        return launch_local(env.python, request, self.registry)
