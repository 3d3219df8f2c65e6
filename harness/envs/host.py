"""The host backend: the harness's own interpreter, as it is. Nothing is installed."""

from __future__ import annotations

import sys

from harness.core.matrix import EnvSpec
from harness.envs.base import (
    Backend,
    Environment,
    LaunchRequest,
    Process,
    check_drift,
    launch_local,
    read_fingerprint,
)


class HostBackend(Backend):
    name = "host"

    def realize(self, spec: EnvSpec) -> Environment:
        fingerprint = read_fingerprint(sys.executable)
        check_drift(spec, fingerprint)
        return Environment(spec=spec, location=sys.prefix, python=sys.executable,
                           fingerprint=fingerprint, built=False)

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        return launch_local(env.python, request, self.registry)
