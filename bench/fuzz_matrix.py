"""Mutate the repository's matrices N times and run `harness plan` on each (in-process, as the
CLI runs it); print the counts by exit code, tracebacks, runs over 2 s, and errors that name
no line. All but exit 0/2 must be 0.

    python bench/fuzz_matrix.py [-n 10000] [--seed 0] [--jobs 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cli import main  # noqa: E402
from tests.mutate import mutate  # noqa: E402

SEEDS = [ROOT / "matrix.yaml", ROOT / "matrices" / "gpu-host.yaml"]
LINE = re.compile(r"^harness: error: .+?:\d+: .+$")


def one(seed: int) -> tuple[str, float, str]:
    source = SEEDS[seed % len(SEEDS)]
    path = source.parent / f".fuzz-{seed}.yaml"
    path.write_bytes(mutate(source.read_bytes(), random.Random(seed)))
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["plan", "-m", str(path), "--format", "json"])
        kind = f"exit {code}"
        text = err.getvalue().strip()
        if code == 2 and not (LINE.match(text) and "\n" not in text
                              and len(text) <= 216):
            kind = "exit 2 without a line"
    except BaseException:  # what the CLI let through: a traceback the user would see
        kind, text = "traceback", traceback.format_exc(limit=-3)
    finally:
        path.unlink(missing_ok=True)
    return kind, time.monotonic() - start, text


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    slow: list[tuple[int, float]] = []
    examples: dict[str, str] = {}
    start = time.monotonic()
    seeds = range(args.seed, args.seed + args.n)
    with ProcessPoolExecutor(args.jobs) as pool:
        for seed, (kind, seconds, text) in zip(seeds, pool.map(one, seeds, chunksize=20),
                                               strict=True):
            counts[kind] += 1
            if seconds > 2:
                slow.append((seed, seconds))
            if kind not in ("exit 0", "exit 2"):
                examples.setdefault(kind, f"seed {seed}: {text[-400:]}")
    print(f"{args.n} mutants of {', '.join(p.name for p in SEEDS)} in "
          f"{time.monotonic() - start:.0f} s:")
    for kind, count in sorted(counts.items()):
        print(f"  {kind}: {count}")
    print(f"  over 2 s: {len(slow)}" + (f" (slowest: seed {max(slow, key=lambda s: s[1])})"
                                         if slow else ""))
    for kind, text in examples.items():
        print(f"first {kind}: {text}")


if __name__ == "__main__":
    main_bench()
