"""Secrets stay out of cells (an allow-list of variables, plus ``HARNESS_PASS_ENV``) and out
of everything the harness writes (secret-looking values become ``***``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

#: Passed from the harness's environment to every local cell (globs).
ALLOWED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG",
           "LANGUAGE", "LC_*", "CUDA_*", "NVIDIA_*", "LD_LIBRARY_PATH", "NVCC_*", "CC", "CXX",
           "CUDAHOSTCXX", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "SSL_CERT_FILE", "SSL_CERT_DIR",
           "REQUESTS_CA_BUNDLE", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE",
           "TRANSFORMERS_CACHE", "TRITON_CACHE_DIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
           "SYSTEMROOT")
PASS_VARIABLE = "HARNESS_PASS_ENV"  # more names (globs) to pass, separated by spaces or commas
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MASK = "***"
MIN_LENGTH = 6  # shorter values ("1", "true") would mask half the log


def passed(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` a cell may see (a secret only if asked for by name)."""
    extra = [p for p in re.split(r"[\s,]+", environ.get(PASS_VARIABLE, "")) if p]
    allowed = (*ALLOWED, *extra)
    return {k: v for k, v in environ.items()
            if any(fnmatchcase(k, pattern) for pattern in allowed)
            and (not SECRET_NAME.search(k) or k in extra)}


def secret_values(*sources: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """Values of secret-looking variables, longest first (a token inside another is masked
    by the longer one first)."""
    found = {v for source in sources for k, v in source
             if SECRET_NAME.search(k) and len(v) >= MIN_LENGTH}
    return tuple(sorted(found, key=len, reverse=True))


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)

    @classmethod
    def from_environment(cls, *extra: Iterable[tuple[str, str]]) -> Redactor:
        return cls(secret_values(os.environ.items(), *extra))

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, MASK)
        return value

    def data(self, value: bytes) -> bytes:
        for secret in self.secrets:
            value = value.replace(secret.encode(), MASK.encode())
        return value

    def obj(self, value: Any) -> Any:
        """Strings anywhere inside dicts, lists and tuples."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.obj(k): self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.obj(v) for v in value)
        return value
