"""Commands over environments: envs (list, prune, check, build), wheelhouse, images."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from fnmatch import fnmatchcase

from packaging.utils import canonicalize_name

from harness.commands import naming
from harness.core.backends import REGISTRY
from harness.core.errors import HarnessError, UsageError
from harness.core.matrix import EnvSpec
from harness.core.paths import default_cache_dir
from harness.envs import get_backend, inventory
from harness.envs.docker import connect
from harness.envs.images import LOCAL_BASE, bootstrap_base
from harness.envs.overlay import read_packages
from harness.envs.preflight import (
    DEFAULT_PLATFORM,
    EnvBuilt,
    EnvCheck,
    EnvWheels,
    build_wheelhouse,
    build_wheels,
    check_environments,
    first_lines,
    render_table,
    summary,
    wheelhouse_summary,
)
from harness.envs.wheelkey import url_sources
from harness.matrix.load import load_matrix
from harness.matrix.sources import find_links_folders, offline_from_environment, with_find_links


def cmd_envs(args: argparse.Namespace) -> int:
    cache = default_cache_dir()
    if args.action == "check":
        return _check(args)
    if args.action == "build":
        return _build(args)
    if args.action == "list":
        listing = inventory.listing(cache)
        if args.format == "json":
            print(json.dumps(listing, indent=1))
            return 0
        for e in listing:
            print(f"{e['backend']:6} {e['key']}  {e['name']}  {e['location']}"
                  + ("  (half-built: prune removes it)" if e.get("half_built") else
                     "  (an earlier harness's folder: prune removes it)" if e.get("stale")
                     else ""))
        print(f"{len(listing)} environments under {cache}")
        return 0
    keep = None if args.all else load_matrix(args.matrix).environments
    pruning = inventory.prune(cache, keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for e in pruning.removed:
        print(f"{verb} {e['name']} ({e['location']})")
    for extra in pruning.extras:
        print(f"{verb} {extra}")
    print(f"{verb} {len(pruning.removed)}, kept {pruning.kept}")
    return 0


def _check(args: argparse.Namespace) -> int:
    cache = default_cache_dir()
    envs = _selected_envs(args)
    backends = {name: get_backend(name, cache) for name in {e.backend for e in envs}}
    skip = frozenset(canonicalize_name(n) for n in args.skip_build)
    known = {canonicalize_name(b.dist) for e in load_matrix(args.matrix).environments
             for b in e.source_builds}
    if skip - known:  # named as the matrix's ``build:`` section knows them
        raise UsageError(f"--skip-build {', '.join(sorted(skip - known))}: no environment "
                         f"builds it from source (built: {', '.join(sorted(known)) or 'none'})")

    def progress(check: EnvCheck) -> None:
        if args.format == "table":
            print(f"{check.name}: resolves {check.resolves}, builds {check.builds}, "
                  f"imports {check.imports}", file=sys.stderr, flush=True)

    checks = check_environments(envs, backends=backends, cache_dir=cache, build=args.build,
                                platform=args.platform or DEFAULT_PLATFORM, jobs=args.jobs,
                                skip_builds=skip, on_done=progress)
    if args.format == "json":
        print(json.dumps([asdict(c) for c in checks], indent=1))
    else:
        print(render_table(checks))
        print(summary(checks))
    return 0 if all(c.ok for c in checks) else 1


def _build(args: argparse.Namespace) -> int:
    if args.into is None:
        raise UsageError("envs build needs --into DIR: the folder the wheels go to")
    archs = tuple(a.removeprefix("sm_").rstrip("a") for a in args.arch)
    if not all(a.isdigit() for a in archs):
        raise UsageError(f"--arch {' '.join(args.arch)}: architectures are sm_80, sm_90, ...")
    selected = _selected_envs(args)
    with naming("--into", args.into):
        args.into.mkdir(parents=True, exist_ok=True)
    envs = [e for e in selected
            if (e.source_builds or url_sources(e)) and REGISTRY[e.backend].local]
    # With a registry, the images of the environments that run in one: built, pushed.
    imaged = [e for e in selected if e.registry and REGISTRY[e.backend].installs
              and not REGISTRY[e.backend].local]

    def progress(report: EnvBuilt) -> None:
        for entry, verb in [(e, "built") for e in report.built] + [(e, "kept") for e in
                                                                   report.kept]:
            print(f"{report.name}: {verb} {entry.wheel} in {entry.folder.name}", flush=True)
        if report.error:
            print(f"{report.name}: {report.error}", flush=True)

    reports = build_wheels(envs, args.into, cache_dir=default_cache_dir(), archs=archs,
                           platform=args.platform or DEFAULT_PLATFORM, on_done=progress)
    failed = sum(bool(r.error) for r in reports)
    for env in imaged:
        try:
            done = get_backend(env.backend, default_cache_dir()).realize(env)
            said = "; ".join(done.fingerprint.get("provenance") or ["image ready"])
        except HarnessError as exc:
            said, failed = first_lines(str(exc)), failed + 1
        print(f"{env.name}: {said}", flush=True)
    print(f"{args.into}: {sum(len(r.built) for r in reports)} wheels built, "
          f"{sum(len(r.kept) for r in reports)} already there, for {len(reports)} environments"
          f" that build from source" + (f"; {len(imaged)} images" if imaged else "")
          + f"; {failed} failed")
    return 1 if failed else 0


def _selected_envs(args: argparse.Namespace) -> list[EnvSpec]:
    """The matrix's environments (sources applied), filtered by ``--env`` globs."""
    spec = with_find_links(load_matrix(args.matrix), find_links_folders(tuple(args.find_links)),
                           offline=offline_from_environment(args.offline),
                           registry=vars(args).get("registry"))
    envs = [e for e in spec.environments
            if not args.env or any(fnmatchcase(e.name, g) for g in args.env)]
    if not envs:
        raise UsageError("--env: no environment matches " + ", ".join(args.env))
    return envs


def cmd_wheelhouse(args: argparse.Namespace) -> int:
    envs = [e for e in _selected_envs(args) if REGISTRY[e.backend].local]
    with naming("--base-packages", args.base_packages):
        base = read_packages(args.base_packages) if args.base_packages else None
    with naming("wheelhouse", args.folder):
        args.folder.mkdir(parents=True, exist_ok=True)
    if args.target_python:
        envs = [replace(e, python=args.target_python) if e.base else e for e in envs]

    def progress(report: EnvWheels) -> None:
        state = report.error or (f"{len(report.wheels)} wheels"
                                 + (f", {len(report.missing)} missing" if report.missing else ""))
        print(f"{report.name}: {state}", flush=True)
        for pin, why in report.missing.items():
            print(f"  missing {pin}: {why}", flush=True)

    reports = build_wheelhouse(envs, args.folder, cache_dir=default_cache_dir(),
                               platform=args.platform or DEFAULT_PLATFORM, base_packages=base,
                               on_done=progress)
    print(wheelhouse_summary(reports, args.folder))
    return 1 if any(r.error or r.missing for r in reports) else 0


def cmd_images(args: argparse.Namespace) -> int:
    print(bootstrap_base(connect(), tag=args.tag or LOCAL_BASE, suite=args.suite,
                         mirror=args.mirror, force=args.force))
    return 0
