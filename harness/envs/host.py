"""The host backend: the harness's own interpreter, as it is. Nothing is installed."""

from __future__ import annotations

import sys

from harness.core.matrix import EnvSpec
from harness.envs import base


class HostBackend(base.Backend):
    name = "host"

    def _find(self, spec: EnvSpec, place: None) -> base.Environment:
        return base.Environment(spec=spec, location=sys.prefix, python=sys.executable,
                                fingerprint=base.read_fingerprint(sys.executable))
