"""Import every top-level module of the named distributions; print what failed, as JSON.

Run inside the environment under test (stdlib only), right after it is built:
``python harness_imports.py torch transformer-lens``. An environment whose packages do not
import is broken for every case it would run, so the harness reports it once, as the
environment's ERROR, instead of letting each cell FAIL for the same reason.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import sys
import traceback


def top_level_modules(dist_name: str) -> list[str]:
    """The importable top-level names a distribution installs (top_level.txt, else RECORD)."""
    dist = md.distribution(dist_name)
    text = dist.read_text("top_level.txt")
    if text:
        names = [line.strip() for line in text.splitlines()]
    else:
        names = []
        for path in dist.files or ():
            parts = path.parts
            if len(parts) > 1 and parts[1] == "__init__.py":
                names.append(parts[0])
            elif len(parts) == 1 and parts[0].endswith(".py"):
                names.append(parts[0][:-3])
    return sorted({n for n in names if n and n.isidentifier() and not n.startswith("_")})


def check(dist_names: list[str]) -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {}
    for name in dist_names:
        try:
            modules = top_level_modules(name)
        except md.PackageNotFoundError:
            out[name] = {"": "not installed"}
            continue
        out[name] = {}
        for module in modules:
            try:
                importlib.import_module(module)
                out[name][module] = None
            except BaseException as exc:  # SystemExit from a module is a finding too
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                out[name][module] = last[:400]
    return out


def main(names: list[str]) -> None:
    # A module may print while it is imported (a banner, a C library's printf to fd 1): send
    # all of that to stderr, and keep the real stdout for the JSON alone.
    sys.stdout.flush()
    result_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        report = check(names)
    finally:
        sys.stdout.flush()
    with os.fdopen(result_fd, "w") as out:
        json.dump(report, out, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
