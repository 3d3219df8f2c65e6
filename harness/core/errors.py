"""One exception hierarchy. User mistakes print one line and exit 2; bugs keep their traceback."""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = 1


class UsageError(HarnessError):
    """A mistake by the user: bad flag, bad file, unknown name. One line, exit 2."""

    exit_code = 2


def one_line(text: str, limit: int = 200) -> str:
    """Control characters shown as escapes, whitespace runs as one space, cut to ``limit``."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in " ".join(text.split()))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


class SpecError(UsageError):
    """matrix.yaml is malformed; one line of at most 200 characters naming file, line, path."""

    def __init__(self, message: str, *, file: str, line: int | None, path: str = "") -> None:
        where = f"{file}:{line}" if line else file
        self.file, self.line, self.path = file, line, path
        super().__init__(one_line(f"{where}: {path}: {message}" if path else
                                  f"{where}: {message}"))


class BackendError(HarnessError):
    """An environment backend failed (foreign errors are translated into this at the boundary)."""


class EnvBuildError(BackendError):
    """An environment could not be built; its cells become ERROR, the run goes on."""


class EnvImportError(EnvBuildError):
    """The environment was built, but a package it names does not import."""


class DriftError(BackendError):
    """The built environment does not hold what its spec asked for."""


class InfraError(BackendError):
    """The machine failed, not the case (a container, Docker, a Ray node): the cell is retried."""


class StoreError(UsageError):
    """A run directory is missing or unreadable (a wrong run id, a wrong --reports)."""
