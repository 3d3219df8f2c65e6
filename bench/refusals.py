"""How fast ``harness plan`` refuses a matrix it cannot plan (issue 26 item 5, issue 49 item 13).

Writes oversized matrices in a temporary folder and times ``python -m harness plan -m
FILE`` refusing each, next to the plan of the repository's own matrix.yaml for reference:

- *mutant*: the repository's matrix.yaml with the ``gpu`` matrix's torch axis grown from 2 to
  ``--torch`` versions (default 1,153): about 720,000 cells, although its environments
  (about 9,200) stay under the cell limit, so only the cases and targets push it over;
- *values*: a matrix whose one axis lists ``--values`` versions (default 200,000), about
  1.7 MB of YAML: refused for its size, whatever it would expand to;
- *named*: ``--named`` named environments (default 12,000), each pinning two packages, every
  case on the CPU: past the cell limit, under the value limit;
- *axis*: one axis of ``--axis`` versions (default 40,000), every case: past the cell limit;
- *string*: one value of ``--chars`` characters (default 1,000,000);
- *nested*: lists nested ``--depth`` deep (default 100,000).

    python bench/refusals.py [--repeat 3] [--torch 1153] [--values 200000] [--named 12000]
        [--axis 40000] [--chars 1000000] [--depth 100000]

How the figures are taken:

- Every run is ``python -m harness plan -m FILE`` with ``PYTHONPATH`` at this checkout, in a
  fresh process: the seconds include the interpreter's start and the imports, as a user sees
  them. Each figure is the median of ``--repeat`` runs.
- Peak memory is the child's own ``ru_maxrss``, and its CPU time ``ru_utime + ru_stime``, read
  with ``os.wait4`` on its pid by a small wrapper interpreter (a child forked from this script
  would count this script's memory). On a shared machine the CPU seconds move less than the
  wall seconds: both are printed, with the load average.
- The cases are collected once before timing, into a cache folder of the benchmark's own:
  a warm cache, as on any machine that planned before.
- An oversized matrix must exit 2 with one line; the reference must exit 0. Anything else is
  a failure, shown with the run's stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common import (
    ROOT,
    Figures,
    command_line,
    harness_env,
    load_line,
    revision,
    run_fresh,
    speed_line,
    warm_cases,
)

GPU_TORCH = 'torch: ["2.1.2", "2.4.1"]'  # the axis the mutant grows, as matrix.yaml has it
#: Each oversized matrix's size: its flag, its default, what it counts.
SIZES = (("torch", 1153, "torch versions in the mutant's gpu matrix"),
         ("values", 200_000, "values in the big-file matrix"),
         ("named", 12_000, "named environments in the named matrix"),
         ("axis", 40_000, "versions of the long axis"),
         ("chars", 1_000_000, "characters of the long value"),
         ("depth", 100_000, "nesting of the deep matrix"))
TIMEOUT = 600.0  # a run that has not ended by then is killed, and the benchmark stops


@dataclass(frozen=True)
class Case:
    name: str
    matrix: Path
    code: int  # the exit code a correct harness gives
    size: str  # what the matrix holds, for the table


@dataclass(frozen=True)
class Measure(Figures):
    said: str = ""  # the last line of stderr: the refusal


def mutant_text(torch_versions: int) -> str:
    """matrix.yaml with the gpu matrix's torch axis grown to ``torch_versions`` values."""
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    if GPU_TORCH not in text:
        raise SystemExit(f"matrix.yaml has no {GPU_TORCH!r} to grow: update bench/refusals.py")
    versions = ", ".join(f'"2.{i // 100}.{i % 100}"' for i in range(torch_versions))
    return text.replace(GPU_TORCH, f"torch: [{versions}]", 1).replace(
        "cases_dir: cases", f"cases_dir: {ROOT / 'cases'}", 1)


def values_text(count: int) -> str:
    """One axis of ``count`` quoted numbers, as versions are quoted: about 8.5 bytes a value."""
    return one_axis("[" + ",".join(f'"{i}"' for i in range(count)) + "]")


def named_text(count: int) -> str:
    """``count`` named environments of two pins each."""
    envs = "".join(f"  e{i}:\n    pins: {{torch: '2.{i // 100}.{i % 100}', numpy: '1.{i}'}}\n"
                   for i in range(count))
    return f"version: 1\ncases_dir: {ROOT / 'cases'}\nenvironments:\n{envs}"


def one_axis(values: str) -> str:
    """A matrix of one entry whose torch axis is ``values`` (YAML)."""
    return (f"version: 1\ncases_dir: {ROOT / 'cases'}\nmatrices:\n  big:\n    axes:\n"
            f"      torch: {values}\n")


def axis_text(count: int) -> str:
    """One axis of ``count`` versions, under the value limit: refused on its cells."""
    return one_axis("[" + ",".join(f'"1.{i}"' for i in range(count)) + "]")


def string_text(chars: int) -> str:
    """One version of ``chars`` characters."""
    return one_axis(f"['{'x' * chars}']")


def nested_text(depth: int) -> str:
    """An axis of lists nested ``depth`` deep."""
    return one_axis("[" * depth + "]" * depth)


def run_once(matrix: Path, env: dict[str, str], out: Path) -> Measure:
    run = run_fresh(("plan", "-m", str(matrix)), env=env, cwd=ROOT, out=out, timeout=TIMEOUT)
    lines = run.stderr_lines()
    if run.figures is None:  # killed, or the wrapper itself failed: no figure to show
        why = f"killed at the {TIMEOUT:g} s limit" if run.timed_out else f"exit {run.returncode}"
        raise SystemExit(f"harness plan -m {matrix}: no figures ({why})\n  "
                         + "\n  ".join(lines[-15:] or ["(no stderr)"]))
    return Measure(**asdict(run.figures), said=lines[-1] if lines else "")


def measure(case: Case, env: dict[str, str], out: Path, repeat: int) -> Measure:
    runs = [run_once(case.matrix, env, out) for _ in range(repeat)]
    wrong = [m for m in runs if m.code != case.code]
    if wrong:
        return wrong[0]
    return Measure(seconds=statistics.median(m.seconds for m in runs),
                   cpu=statistics.median(m.cpu for m in runs),
                   peak_mib=statistics.median(m.peak_mib for m in runs), code=runs[0].code,
                   said=runs[0].said)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per matrix (median)")
    for flag, default, what in SIZES:
        parser.add_argument(f"--{flag}", type=int, default=default,
                            help=f"{what} (default: {default})")
    args = parser.parse_args(argv)
    if min(args.repeat, *(getattr(args, flag) for flag, _, _ in SIZES)) < 1:
        parser.error("--repeat, " + ", ".join(f"--{flag}" for flag, _, _ in SIZES)
                     + " must be at least 1")
    command = command_line(argv)
    with tempfile.TemporaryDirectory(prefix="harness-refusals-") as tmp:
        root = Path(tmp)
        mutant, values = root / "mutant.yaml", root / "values.yaml"
        mutant.write_text(mutant_text(args.torch), encoding="utf-8")
        values.write_text(values_text(args.values), encoding="utf-8")
        named, axis, string, nested = (root / f"{n}.yaml" for n in ("named", "axis", "string",
                                                                     "nested"))
        named.write_text(named_text(args.named), encoding="utf-8")
        axis.write_text(axis_text(args.axis), encoding="utf-8")
        string.write_text(string_text(args.chars), encoding="utf-8")
        nested.write_text(nested_text(args.depth), encoding="utf-8")
        cases = [
            Case("mutant: refused", mutant, 2, f"{mutant.stat().st_size / 1e3:,.0f} kB, "
                 f"gpu torch axis × {args.torch:,}"),
            Case("values: refused", values, 2, f"{values.stat().st_size / 1e6:.2f} MB, "
                 f"{args.values:,} values"),
            Case("named: refused", named, 2, f"{args.named:,} named environments"),
            Case("axis: refused", axis, 2, f"one axis of {args.axis:,} versions"),
            Case("string: refused", string, 2, f"a value of {args.chars:,} characters"),
            Case("nested: refused", nested, 2, f"lists nested {args.depth:,} deep"),
            Case("matrix.yaml: planned (reference)", ROOT / "matrix.yaml", 0,
                 f"{(ROOT / 'matrix.yaml').stat().st_size / 1e3:,.0f} kB"),
        ]
        env = harness_env(root / "cache")
        warm_cases(env)  # the collection cache, warm
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load_before, speed_before = load_line(2), speed_line()
        found = {c.name: measure(c, env, root / f"run{i}", args.repeat)
                 for i, c in enumerate(cases)}
    print(f"$ {command}")
    print(f"{started}, harness at {revision()}; {os.cpu_count()} cores, {load_before} at "
          f"the start, {load_line(2)} at the end")
    print(f"{speed_before} at the start; {speed_line().removeprefix('speed: ')} at the end")
    print(f"each figure: median of {args.repeat} fresh processes; seconds wall, CPU seconds "
          "(user + system), MiB peak RSS")
    print()
    print("| matrix | size | s | CPU s | MiB | exit | what it says |")
    print("|---|---|---:|---:|---:|---:|---|")
    failed = []
    for case in cases:
        m = found[case.name]
        if m.code != case.code:
            failed.append(case.name)
        said = m.said.replace("|", "\\|").replace(str(case.matrix), case.matrix.name)
        print(f"| {case.name} | {case.size} | {m.seconds:.2f} | {m.cpu:.2f} | {m.peak_mib:.0f} | "
              f"{m.code}{'' if m.code == case.code else ' ✗'} | {said[:160]} |")
    if failed:
        print("\nfailed (wrong exit code): " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
