"""A run's snapshot.json against Apache Arrow formats: a fleet run's cells read back into Python.

``harness/records/snapshot.py`` keeps, beside a run's record, its cells' columns (outcome
letters, cell ids, durations, and environment, case, variant, hardware, signature, axis values
and versions as tables of distinct values and a code a cell) as one JSON document written
with orjson. This measures that choice against the record it replaces and against the same
columns in Parquet and in the Arrow IPC file format (Feather v2) read through pyarrow:

    python bench/snapshot.py --run reports/runs/RUN [--repeat 3] [--arrow-python PATH]

For a run folder ``RUN`` (a fleet's: 100,000 cells) it times, each ``--repeat`` times:

- the record: ``RunStore(run).results()``, what the readers of a run did before the snapshot;
- snapshot.json: ``snapshot.read(run).rows()`` (every cell as a ``snapshot.Row``), and
  ``.letters`` + ``.logical_keys()`` alone (what history reads of each run);
- the same two under ``--arrow-python`` too, if that is another interpreter (its start
  differs: this checkout's dev venv has .pth files to run);
- the same columns, written once from the snapshot (untimed), read with pyarrow and turned
  into the same rows (``snapshot.Row``, outcomes as ``Outcome``, mappings as dicts), and into
  the letters + keys (only those five columns read: Arrow's projection), from

  - Parquet (pyarrow's defaults: dictionary encoding, snappy), read with ``ParquetFile.read``
    (``pq.read_table`` goes through pyarrow.dataset, a slower import);
  - an Arrow IPC file, uncompressed, lz4 (frame) and zstd, memory-mapped and read with
    ``pyarrow.ipc.open_file``;

- what the imports alone cost: a bare interpreter, orjson, pyarrow (and its parquet module),
  and ``harness.records.snapshot``.

How the Arrow files hold the columns: each tabled column is a dictionary column (its table
the dictionary, its codes the indices, of the narrowest integer type that holds them; the
signature's "none" a null index, as Parquet writes no null dictionary entry), the outcome a
dictionary column of its letters, cell ids strings, durations float64. Mappings (values,
versions) are their JSON text (orjson, in the mapping's order) in a dictionary column: the
reader decodes each distinct text once, as the snapshot does, and every cell of an
environment shares its dict. That reads fastest of the ways tried. A dictionary whose values
are ``map<string, string>`` (IPC only: Parquet writes no dictionary of a nested type) gives
the same rows, a run's 5,000 distinct mappings turned into dicts a few ms slower than orjson
reads their text. ``map<string, string>`` columns without a dictionary (pyarrow has no
``dictionary_encode`` for them; Parquet dictionary-encodes only their strings), a dict made
per cell, take seconds: they are in the table, as is the obvious ``Table.to_pylist()``. A
struct column was not tried: the keys differ between environments, so it would bring back
nulls to strip.

A dictionary column is turned into Python as its dictionary's values and its indices'
``to_pylist()``, looked up in Python (``map``): pyarrow's own ``to_pylist()`` of a dictionary
column took 0.2 s for 100,000 cells against 0.01 s.

How the figures are taken:

- Every read is a fresh interpreter (``python -c``) with ``PYTHONPATH`` at this checkout, so
  its seconds include the interpreter's start and the imports, as a user sees them; the
  Arrow ones run under ``--arrow-python`` (default: this interpreter; pyarrow is no
  dependency of the project: give the interpreter of a scratch venv that has pyarrow and
  orjson). Wall seconds and peak RSS (``ru_maxrss``) come from bench/common.py's wrapper
  (``os.wait4`` on the child), with its CPU seconds (user + system: pyarrow reads on
  threads). Each figure is the median of ``--repeat`` runs; the order of
  the reads rotates from one repeat to the next.
- The run's record and snapshot are copied to a temporary folder first (the run folder is
  only read; a snapshot that is not current is made there from the record): every file is
  read from the page cache. The children may write bytecode (``PYTHONDONTWRITEBYTECODE`` is
  dropped for them), as an installed package has it; an untimed first run of each writes it.
- That first run of each read also prints a digest (the sha256 of the ``repr``) of what it
  made: the Arrow rows and keys must equal the snapshot's, or the benchmark stops.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import ROOT, WRAPPER, Figures, command_line, load_line, revision

if str(ROOT) not in sys.path:  # this checkout's harness, not whichever one is installed
    sys.path.insert(0, str(ROOT))

from harness.records import snapshot
from harness.records.layout import RESULTS, SHARED

#: Every child's start: the run folder and the file it reads. A third argument asks for the
#: check: the digest of what it made, printed (only the untimed runs are given one).
HEAD = "import sys\nfrom pathlib import Path\nrun, path = Path(sys.argv[1]), Path(sys.argv[2])\n"
TAIL = """
if len(sys.argv) > 3:
    import hashlib
    print(len(out), hashlib.sha256(repr(out).encode()).hexdigest())
"""
RECORD = "from harness.records.store import RunStore\nout = RunStore(run).results()\n"
SNAPSHOT_ROWS = "from harness.records import snapshot\nout = snapshot.read(run).rows()\n"
SNAPSHOT_KEYS = """from harness.records import snapshot
found = snapshot.read(run)
out = [found.letters, found.logical_keys()]
"""
#: What the Arrow readers share: the file read (all columns, or only those named) and a
#: column turned into a list of Python values.
ARROW = '''import pyarrow as pa
from harness.records.snapshot import FROM_LETTER, Row
if path.suffix == ".parquet":
    import pyarrow.parquet as pq
    def read(names=None):
        return pq.ParquetFile(path).read(columns=names)
else:
    import pyarrow.ipc as ipc
    def read(names=None):
        source = pa.memory_map(str(path))
        if names is None:
            return ipc.open_file(source).read_all()
        schema = ipc.open_file(source).schema
        fields = [schema.get_field_index(name) for name in names]
        options = ipc.IpcReadOptions(included_fields=fields)
        return ipc.open_file(source, options=options).read_all()
def column(table, name, convert=None):
    col = table.column(name).combine_chunks()
    if not pa.types.is_dictionary(col.type):
        return col.to_pylist()
    values = col.dictionary.to_pylist()
    if convert is not None:
        values = list(map(convert, values))
    codes = col.indices.to_pylist()
    if col.null_count:
        return list(map(dict(enumerate(values)).get, codes))
    return list(map(values.__getitem__, codes))
'''
ARROW_ROWS = ARROW + """import orjson
table = read()
json_text = pa.types.is_dictionary(table.schema.field("values").type)
c = {name: column(table, name, orjson.loads if json_text and name in ("values", "versions")
                  else None) for name in table.column_names}
if not json_text:  # map<string, string>: each cell's (key, value) pairs
    c["values"] = list(map(dict, c["values"]))
    c["versions"] = list(map(dict, c["versions"]))
out = list(map(Row._make, zip(
    c["environment"], c["case_id"], c["variant"], c["hardware_target"], c["cell_id"],
    map(FROM_LETTER.__getitem__, c["outcome"]), c["signature"], c["duration"], c["values"],
    c["versions"], strict=True)))
"""
ARROW_PYLIST = ARROW + """import orjson
out = [Row(r["environment"], r["case_id"], r["variant"], r["hardware_target"], r["cell_id"],
           FROM_LETTER[r["outcome"]], r["signature"], r["duration"], orjson.loads(r["values"]),
           orjson.loads(r["versions"])) for r in read().to_pylist()]
"""
ARROW_KEYS = ARROW + """names = ["outcome", "environment", "case_id", "variant", "hardware_target"]
table = read(names)
cases = [f"{c}::{v}" for c, v in zip(column(table, "case_id"), column(table, "variant"),
                                      strict=True)]
out = ["".join(column(table, "outcome")),
       list(zip(column(table, "environment"), cases, column(table, "hardware_target"),
                strict=True))]
"""
#: Writes the Arrow files from snapshot.json (argv[1]) into a folder (argv[2]); untimed.
WRITE = '''import sys
from pathlib import Path
import orjson
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
source, folder = Path(sys.argv[1]), Path(sys.argv[2])
data = orjson.loads(source.read_bytes().partition(b"\\n")[2])
def dictionary(values, codes):
    if None in values:  # Parquet writes no null entry in a dictionary: a null code instead
        gone = values.index(None)
        values = values[:gone] + values[gone + 1:]
        codes = [None if c == gone else c - (c > gone) for c in codes]
    width = next(t for t in (pa.int8(), pa.int16(), pa.int32())
                 if len(values) < 2 ** (t.bit_width - 1))
    return pa.DictionaryArray.from_arrays(pa.array(codes, width), pa.array(values, pa.string()))
def tabled(name, encode=None):
    values = data["tables"][name]
    return dictionary([encode(v) for v in values] if encode else values, data["codes"][name])
letters = sorted(set(data["outcome"]))
index = {letter: i for i, letter in enumerate(letters)}
columns = {"outcome": dictionary(letters, [index[x] for x in data["outcome"]]),
           **{name: tabled(name) for name in ("environment", "case_id", "variant",
                                              "hardware_target")},
           "cell_id": pa.array(data["cell_id"], pa.string()),
           "signature": tabled("signature"),
           "duration": pa.array(data["duration"], pa.float64())}
as_text = dict(columns, **{name: tabled(name, lambda v: orjson.dumps(v).decode())
                           for name in ("values", "versions")})
pairs = pa.map_(pa.string(), pa.string())
as_map = dict(columns, **{name: pa.array([list(data["tables"][name][c].items())
                                          for c in data["codes"][name]], pairs)
                          for name in ("values", "versions")})
def ipc_file(table, path, compression):
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_file(path, table.schema, options=options) as writer:
        writer.write_table(table)
text, mapped = pa.table(as_text), pa.table(as_map)
pq.write_table(text, folder / "snapshot.parquet")
ipc_file(text, folder / "snapshot.arrow", None)
ipc_file(text, folder / "snapshot.lz4.arrow", "lz4")
ipc_file(text, folder / "snapshot.zstd.arrow", "zstd")
pq.write_table(mapped, folder / "map.parquet")
ipc_file(mapped, folder / "map.arrow", None)
'''
VERSIONS = """import sys
names = []
for module in sys.argv[1:]:
    try:
        names.append(f"{module} {__import__(module).__version__}")
    except ImportError:
        names.append(f"no {module}")
print(f"Python {sys.version.split()[0]}, " + ", ".join(names))
"""


@dataclass(frozen=True)
class Read:
    """One thing timed: what it reads, under which interpreter, with which code."""

    label: str
    python: str
    code: str
    file: str  # the file's name in the work folder ("" for the imports alone)
    same_as: str = ""  # the label of the read whose digest this one's must equal


def child(read: Read, work: Path, out: Path, env: dict[str, str], check: bool = False
          ) -> tuple[Figures, str]:
    """Run ``read`` once, fresh, through the wrapper: its figures and its stdout."""
    figures_path = out.with_suffix(".json")
    figures_path.unlink(missing_ok=True)
    argv = [sys.executable, "-c", WRAPPER, str(figures_path), read.python, "-c",
            HEAD + read.code + TAIL, str(work), str(work / read.file),
            *(["check"] if check else [])]
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    try:
        figures = _figures(figures_path)
    except (OSError, ValueError, KeyError, TypeError):
        sys.exit(f"{read.label}: the wrapper left no figures:\n{proc.stderr[-3000:]}")
    if figures.code != 0:
        sys.exit(f"{read.label}: exited {figures.code}:\n{proc.stderr[-3000:]}")
    return figures, proc.stdout.strip()


def _figures(path: Path) -> Figures:
    """What the wrapper wrote (as bench/common.py's ``run_fresh`` reads it)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return Figures(float(data["seconds"]), float(data["cpu"]), data["maxrss_kib"] / 1024,
                   int(data["code"]))


def has_pyarrow(python: str) -> bool:
    return subprocess.run([python, "-c", "import pyarrow, orjson"], capture_output=True,
                          check=False).returncode == 0


def describe(python: str, modules: Sequence[str]) -> str:
    proc = subprocess.run([python, "-c", VERSIONS, *modules], capture_output=True, text=True,
                          check=False)
    return f"{python}: {proc.stdout.strip() or 'unknown'}"


def copy_run(run: Path, work: Path) -> None:
    """The run's record and a current snapshot of it, in ``work``."""
    for name in (RESULTS, SHARED, snapshot.SNAPSHOT):
        if (run / name).exists():
            shutil.copy2(run / name, work / name)
    if not (work / RESULTS).exists():
        sys.exit(f"{run}: no {RESULTS}")
    if snapshot.read(work) is None:  # none, or not of the record as it is now: made here
        snapshot.load(work)
    if snapshot.read(work) is None:
        sys.exit(f"{run}: could not make a snapshot of its record")


def reads(python: str, arrow: str | None) -> list[Read]:
    """Everything timed, in table order."""
    rows, keys = "snapshot.json rows", "snapshot.json letters + keys"
    found = [Read("record: RunStore.results()", python, RECORD, RESULTS),
             Read(rows, python, SNAPSHOT_ROWS, snapshot.SNAPSHOT),
             Read(keys, python, SNAPSHOT_KEYS, snapshot.SNAPSHOT)]
    if arrow is not None and arrow != python:  # the same reads, the same interpreter start
        found += [Read(f"{rows} (arrow python)", arrow, SNAPSHOT_ROWS, snapshot.SNAPSHOT, rows),
                  Read(f"{keys} (arrow python)", arrow, SNAPSHOT_KEYS, snapshot.SNAPSHOT, keys)]
    if arrow is not None:
        for name, label in (("snapshot.parquet", "Parquet"), ("snapshot.arrow", "IPC"),
                            ("snapshot.lz4.arrow", "IPC lz4"),
                            ("snapshot.zstd.arrow", "IPC zstd")):
            found += [Read(f"{label} rows", arrow, ARROW_ROWS, name, rows),
                      Read(f"{label} letters + keys", arrow, ARROW_KEYS, name, keys)]
        found += [Read("Parquet, map columns: rows", arrow, ARROW_ROWS, "map.parquet", rows),
                  Read("IPC, map columns: rows", arrow, ARROW_ROWS, "map.arrow", rows),
                  Read("IPC: rows by Table.to_pylist()", arrow, ARROW_PYLIST,
                       "snapshot.arrow", rows)]
    imports = [("bare interpreter", "pass", python), ("import orjson", "import orjson", python),
               ("import harness.records.snapshot", "from harness.records import snapshot",
                python)]
    if arrow is not None:
        if arrow != python:
            imports.append(("bare interpreter (arrow)", "pass", arrow))
        imports += [("import pyarrow", "import pyarrow", arrow),
                    ("import pyarrow, pyarrow.ipc", "import pyarrow, pyarrow.ipc", arrow),
                    ("import pyarrow, pyarrow.parquet", "import pyarrow, pyarrow.parquet",
                     arrow)]
    return found + [Read(label, where, code + "\nout = []\n", "") for label, code, where
                    in imports]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True,
                        help="a run folder (results.jsonl, shared.jsonl, snapshot.json)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--arrow-python", default=sys.executable,
                        help="the interpreter that reads the Arrow files (pyarrow, orjson)")
    args = parser.parse_args(argv)
    arrow: str | None = args.arrow_python if has_pyarrow(args.arrow_python) else None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode, as an installed package has it

    print(f"`{command_line(argv)}` at {revision()}; run {args.run.resolve()}\n")
    print(f"- {describe(sys.executable, ['orjson'])}")
    if arrow is None:
        print("- pyarrow not installed: skipped")
    else:
        print(f"- {describe(arrow, ['pyarrow', 'orjson'])}")
    print(f"- {load_line(2)} before", flush=True)

    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as tmp:
        work = Path(tmp)
        copy_run(args.run.resolve(), work)
        if arrow is not None:
            subprocess.run([arrow, "-c", WRITE, str(work / snapshot.SNAPSHOT), str(work)],
                           env=env, check=True)
        todo = reads(sys.executable, arrow)
        digests: dict[str, str] = {}
        for i, read in enumerate(todo):  # untimed: bytecode written, caches warm, checked
            _, digests[read.label] = child(read, work, work / f"check-{i}", env, check=True)
            if read.same_as and digests[read.label] != digests[read.same_as]:
                sys.exit(f"{read.label}: not what {read.same_as} gives "
                         f"({digests[read.label]} != {digests[read.same_as]})")
        figures: dict[str, list[Figures]] = {read.label: [] for read in todo}
        for repeat in range(args.repeat):
            shift = repeat * len(todo) // max(args.repeat, 1)
            for i, read in enumerate(todo[shift:] + todo[:shift]):
                figures[read.label].append(child(read, work, work / f"run-{repeat}-{i}", env)[0])
        sizes = {read.file: (work / read.file).stat().st_size for read in todo if read.file}
        sizes[SHARED] = (work / SHARED).stat().st_size if (work / SHARED).exists() else 0

    width = max(8, 6 * args.repeat - 2)
    print(f"- {load_line(2)} after\n")
    label = max(len(read.label) for read in todo)
    print(f"| {'read':{label}} | {'file':22} | MiB  | median s | {'runs (s)':{width}} | CPU s "
          "| peak MiB |")
    print(f"|{'-' * (label + 2)}|{'-' * 24}|-----:|---------:|{'-' * (width + 2)}|------:|"
          "---------:|")
    for read in todo:
        runs = figures[read.label]
        seconds = statistics.median(f.seconds for f in runs)
        cpu = statistics.median(f.cpu for f in runs)
        peak = statistics.median(f.peak_mib for f in runs)
        each = ", ".join(f"{f.seconds:.2f}" for f in runs)
        size = sizes.get(read.file, 0) + (sizes[SHARED] if read.file == RESULTS else 0)
        file = read.file + (" + shared" if read.file == RESULTS else "")
        shown = f"{size / 2**20:4.1f}" if read.file else "    "
        print(f"| {read.label:{label}} | {file:22} | {shown} | {seconds:8.3f} | {each:{width}} "
              f"| {cpu:5.2f} | {peak:8.0f} |")
    print("\nfiles: " + ", ".join(f"{name} {size:,} B" for name, size in sizes.items()))
    print("equal (sha256 of repr): rows " + digests[todo[1].label]
          + "; letters + keys " + digests[todo[2].label])

if __name__ == "__main__":
    main()
