"""A run's snapshot: what later readers compare, as columns, in one file beside the record.

``results.jsonl`` stays the record (one line per attempt, every field); the snapshot is derived
from it and says, for each cell's last attempt, only what is read across runs: its logical key
(environment, case, variant, hardware), content key, outcome, signature, duration, axis values
and versions (the fingerprint's key versions and its freeze hash). "What changed since the run
before", history, a baseline taken from a run and the durations a scheduler starts from read
this instead of decoding a fleet's 100,000 lines (about 1.2 s of CPU and 300 MB a run read).

The file (``snapshot.json``) is a first line ``# results.jsonl <size> <mtime_ns> snapshot 2`` (the
record it was made from: a record that has grown or been rewritten since makes it stale, and
it is made again from the record), a line of JSON with the outcome letters and the digest of
the keys (all that history reads of a run whose keys it has seen: 0.1 MB of the 4.7), and one
JSON document of the other columns. Strings and mappings that repeat
(environment names, cases, signatures, axis values, versions) are each written once, in a
table, and each cell holds its index in it; the outcome is one letter a cell. JSON read by
orjson, not Arrow: ``bench/snapshot.py`` (docs/benchmarks.md) reads a fleet's 100,000 cells into
Python rows in 0.33 s / 74 MiB from this file, 0.38-0.45 s / 102-111 MiB from Arrow IPC and
0.59 s / 145 MiB from Parquet (the outcomes and keys alone: a tie), without a dependency that
installs 166 MB; Arrow's files are 1.2 to 3.6 times smaller (1.3-3.9 MB against 4.7 MB).

History's first reading of runs recorded before snapshots writes less in their place
(``make_missing``): the same first two lines, ``keys`` for ``snapshot`` in the first, then
the logical key's columns alone (what history reads of a run: a fleet's 30 runs read in
7.7 s, not 10.4). A reader of more takes it for no snapshot (``load`` makes the whole one
over it).

A merged run's snapshot is made from its shards' where they are current (``prepared``,
``Gathering``): a line the merge passed through is the line the shard's snapshot was made
from, so only each cell's place in the shard's columns is looked up.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, eq
from pathlib import Path
from typing import Any, NamedTuple, Protocol, cast

import msgspec
import orjson

from harness.core import atomic, jsonio
from harness.core.bulk import side_by_side
from harness.core.errors import HarnessError
from harness.core.results import Keyed, Outcome, as_mapping, logical_key
from harness.records import codec
from harness.records.layout import RESULTS
from harness.records.store import RunStore, read_shared

SNAPSHOT = "snapshot.json"
VERSION = 2
LETTER = {Outcome.PASS: "P", Outcome.REPRODUCED: "R", Outcome.FAIL: "F", Outcome.SKIP: "S",
          Outcome.ERROR: "E", Outcome.TIMEOUT: "T", Outcome.CRASH: "C", Outcome.NOT_RUN: ".",
          Outcome.MISSING: "?", Outcome.FLAKY: "~"}
FROM_LETTER = {letter: outcome for outcome, letter in LETTER.items()}
#: What the snapshot's second line holds (``letters``); the third holds the rest.
LETTER_FIELDS = ("format", "cells", "keys_digest", "outcome")
#: The columns a table of distinct values stands behind (each cell: an index into it).
TABLED = ("environment", "case_id", "variant", "hardware_target", "signature", "values",
          "versions")
#: The logical key's columns: what the keys' digest covers, and all a snapshot of the keys
#: (``KEYS``) holds besides the letters.
KEYED = TABLED[:4]
#: What the first line names a file holding the letters and the keys alone, which history's
#: first reading of runs recorded before snapshots makes (``make_missing``): the rest of a
#: snapshot, made then for 30 runs of a fleet, was a third of that reading. A reader of
#: more takes it for no snapshot: ``load`` makes the whole one over it, the others
#: (``Parts``, ``report_rows``) read the record.
KEYS = "keys"

Key = tuple[str, str, str]


class Row(NamedTuple):
    """One cell as the snapshot keeps it. A tuple, not a frozen dataclass: 100,000 of them are
    made per run read, and a dataclass's frozen ``__init__`` costs five times as much."""

    environment: str
    case_id: str
    variant: str
    hardware_target: str
    cell_id: str
    outcome: Outcome
    signature: str | None
    duration: float
    values: Mapping[str, str]
    versions: Mapping[str, str]  # the fingerprint's key versions; "(freeze)": its freeze hash

    @property
    def logical_key(self) -> Key:
        return logical_key(self.environment, self.case_id, self.variant, self.hardware_target)


class Snapshot:
    """A snapshot as read: its columns, turned into rows or keys only when asked."""

    def __init__(self, data: dict[str, Any], made_from: Stamp | None = None) -> None:
        self._data = data
        # The record it was made from, as ``read`` found it current (None: made here).
        self.made_from = made_from
        self.letters: str = data["outcome"]
        self.keys_digest: str = data["keys_digest"]  # equal for runs of the same cells in order

    def __len__(self) -> int:
        return len(self.letters)

    @property
    def cell_ids(self) -> list[str]:
        return self._data["cell_id"]  # type: ignore[no-any-return]

    @property
    def durations(self) -> list[float]:
        return self._data["duration"]  # type: ignore[no-any-return]

    def _column(self, name: str) -> list[Any]:
        return _column(self._data, name)

    def logical_keys(self) -> list[Key]:
        return _logical_keys(self._data)

    def outcomes(self) -> dict[Key, Outcome]:
        """Each logical key's outcome (of two cells of one key, the later row's)."""
        return dict(zip(self.logical_keys(), map(FROM_LETTER.__getitem__, self.letters),
                        strict=True))

    def durations_by_cell(self) -> dict[str, float]:
        """Each cell's duration, where it has one."""
        return {c: d for c, d in zip(self.cell_ids, self.durations, strict=True) if d}

    def codes(self, name: str) -> list[int]:
        """Each cell's index in the table of ``name`` (one of ``TABLED``)."""
        return self._data["codes"][name]  # type: ignore[no-any-return]

    def table(self, name: str) -> list[Any]:
        """The distinct values of ``name`` (one of ``TABLED``), as the codes index them."""
        return self._data["tables"][name]  # type: ignore[no-any-return]

    def rows_at(self, at: Sequence[int]) -> list[Row]:
        """The rows of the cells at these places alone (``[rows()[i] for i in at]``)."""
        tabled = {}
        for name in TABLED:
            table, codes = self.table(name), self.codes(name)
            tabled[name] = [table[codes[i]] for i in at]
        cell_ids, durations, letters = self.cell_ids, self.durations, self.letters
        return list(map(Row._make, zip(
            tabled["environment"], tabled["case_id"], tabled["variant"],
            tabled["hardware_target"], [cell_ids[i] for i in at],
            [FROM_LETTER[letters[i]] for i in at], tabled["signature"],
            [durations[i] for i in at], tabled["values"], tabled["versions"], strict=True)))

    def rows(self) -> list[Row]:
        columns = {name: self._column(name) for name in TABLED}
        outcomes = [FROM_LETTER[x] for x in self.letters]
        return list(map(Row._make, zip(
            columns["environment"], columns["case_id"], columns["variant"],
            columns["hardware_target"], self._data["cell_id"], outcomes, columns["signature"],
            self._data["duration"], columns["values"], columns["versions"], strict=True)))


def _logical_keys(data: Mapping[str, Any]) -> list[Key]:
    """Each cell's logical key, from the key columns' tables and codes of a document."""
    cases = [f"{c}::{v}" for c, v in zip(_column(data, "case_id"), _column(data, "variant"),
                                          strict=True)]
    return list(zip(_column(data, "environment"), cases, _column(data, "hardware_target"),
                    strict=True))


def _column(data: Mapping[str, Any], name: str) -> list[Any]:
    """One of ``TABLED``, a value a cell, from a document's table and codes."""
    table = data["tables"][name]
    return [table[i] for i in data["codes"][name]]


def versions_of(fingerprint: Mapping[str, Any] | None) -> dict[str, str]:
    """What "what changed" compares of a cell's packages: its fingerprint's key versions and
    the hash of its whole freeze (``(freeze)``)."""
    fp = as_mapping(fingerprint)
    found = {str(k): str(v) for k, v in as_mapping(fp.get("key")).items()}
    if fp.get("freeze_sha256"):
        found["(freeze)"] = str(fp["freeze_sha256"])
    return found


def rows_of(results: Iterable[Tabled]) -> list[Row]:
    """``results`` as snapshot rows (what a run in memory is compared as). A fingerprint's
    versions are worked out once per fingerprint: the cells of an environment share it."""
    versions: dict[int, tuple[Any, dict[str, str]]] = {}

    def of(fp: dict[str, Any]) -> dict[str, str]:
        seen = versions.get(id(fp))
        if seen is None or seen[0] is not fp:
            seen = versions[id(fp)] = (fp, versions_of(fp))
        return seen[1]

    return [Row(r.environment, r.case_id, r.variant, r.hardware_target, r.cell_id, r.outcome,
                r.signature, r.duration, r.values, of(r.fingerprint)) for r in results]


Stamp = tuple[int, int]  # the record's size and modification time (ns)


def stamp(run_dir: Path) -> Stamp | None:
    """What a snapshot is made from: the record's size and modification time (taken before
    the record is read, so a record that grows meanwhile leaves a stale snapshot)."""
    try:
        found = (run_dir / RESULTS).stat()
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


class Tabled(Keyed, Protocol):
    """What a snapshot reads of a result: ``CellResult``, or a line a merge passed through
    (its values and fingerprint as the result would hold them)."""

    @property
    def signature(self) -> str | None: ...
    @property
    def values(self) -> Any: ...
    @property
    def fingerprint(self) -> Any: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def cell_id(self) -> str: ...
    @property
    def duration(self) -> Any: ...


def write(run_dir: Path, results: Sequence[Tabled], made_from: Stamp | None = None, *,
          names: Mapping[str, Any] | None = None, gathering: Gathering | None = None
          ) -> bool:
    """The snapshot of ``results`` (each cell's last attempt, in the order ``RunStore.results``
    gives them), made from the record as ``made_from`` found it (default: as it is now).
    ``names``: what a result's fingerprint stands for where it holds a name (a line a merge
    passed through: the values of the merged record's shared.jsonl), as ``RunStore`` puts it
    in place. ``gathering``: where a merge's cells came from, whose shards' snapshots stand
    for the lines it passed through. Whether the file was written: a read-only run folder
    keeps no snapshot, and readers then make it from the record each time."""
    made_from = made_from or stamp(run_dir)
    if made_from is None:
        return False
    if gathering is not None and gathering.ready:
        assert gathering.prepared is not None
        return _store(run_dir, gathering.prepared.body, made_from)
    document = _gathered(results, gathering, names) if gathering is not None else None
    if document is None:
        document = _document(results, names)
    return _store(run_dir, _body(document), made_from)


def _body(document: Mapping[str, Any]) -> bytes:
    """The file but its first line: the letters line, then the rest."""
    letters = {k: document[k] for k in LETTER_FIELDS}
    rest = {k: v for k, v in document.items() if k not in LETTER_FIELDS}
    return jsonio.dumps(letters) + b"\n" + jsonio.dumps(rest)


def _store(run_dir: Path, body: bytes, made_from: Stamp, what: str = "snapshot") -> bool:
    """The file, if the folder takes it (``what``: a snapshot, or of the ``KEYS`` alone)."""
    try:
        atomic.write_bytes(run_dir / SNAPSHOT, head(made_from, what) + body)
    except OSError:
        return False
    return True


def is_current(run_dir: Path, *, keys: bool = False) -> bool:
    """Whether the run's snapshot was made from its record as it is now (its first line
    only: a merge that wrote it need not write it again for its report). ``keys``: a
    snapshot of the keys alone counts too."""
    now = stamp(run_dir)
    try:
        with open(run_dir / SNAPSHOT, "rb") as fh:
            first = fh.readline()
    except OSError:
        return False
    return now is not None and (first == head(now) or (keys and first == head(now, KEYS)))


def make_missing(run_dirs: Sequence[Path]) -> None:
    """What history reads of these runs (their letters and keys), where they have no current
    snapshot, made from their records on two cores and kept as a snapshot of their ``KEYS``:
    the first ``history`` over runs recorded before snapshots makes each (half a second a
    fleet's run). Best effort: a run whose record cannot be read is left to the reader that
    needs it, which says why."""
    stale = [run for run in run_dirs if stamp(run) is not None
             and not is_current(run, keys=True)
             and os.access(run, os.W_OK)]  # a read-only run keeps none: read as ever
    if len(stale) < 2:
        return

    def make(runs: Sequence[Path]) -> None:
        for run in runs:
            with contextlib.suppress(Exception):  # its reader makes it again, or says why
                if not is_current(run, keys=True):  # (a run's end or a report made it since)
                    _made_keys(run)

    # Not even the second process is needed: killed (out of memory), or no fork to be had,
    # the readers make what is still missing one by one.
    with contextlib.suppress(HarnessError, OSError, RuntimeError):
        side_by_side(lambda: make(stale[1::2]), lambda: make(stale[::2]),
                     "making run snapshots")


def read(run_dir: Path) -> Snapshot | None:
    """The run's snapshot if it is current (made from the record as it is now) and whole,
    else None: a damaged or foreign file is never taken for the run's."""
    now = stamp(run_dir)
    data = _read(run_dir, whole=True, now=now) if now is not None else None
    return Snapshot(data, now) if data is not None else None


def _read(run_dir: Path, *, whole: bool, now: Stamp | None = None, keys: bool = False
          ) -> dict[str, Any] | None:
    """The snapshot's letters line (``keys``: and the key columns; ``whole``: and every
    column), if the file is current and what it holds is whole, else None. Short of
    ``whole``, a snapshot of the ``KEYS`` alone will do."""
    now = now or stamp(run_dir)
    if now is None:
        return None
    try:
        with open(run_dir / SNAPSHOT, "rb") as fh:
            first = fh.readline()
            if first != head(now) and (whole or first != head(now, KEYS)):
                return None  # another record's (the run went on, or was resumed), or format
            data = orjson.loads(fh.readline())
            if not _letters_whole(data):
                return None
            if whole or keys:
                data.update(orjson.loads(fh.read()))
                if not (_columns_whole(data) if whole else _keys_whole(data)):
                    return None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None  # none, or damaged: made again
    return data  # type: ignore[no-any-return]


class Letters(NamedTuple):
    """A run's outcome letters (one per cell, in the snapshot's order) and the digest of its
    keys: what history needs of a run whose keys it has already read."""

    letters: str
    keys_digest: str


def letters(run_dir: Path) -> Letters:
    """The run's outcome letters and keys' digest: from the snapshot's second line alone when
    it is current, else from the record (a snapshot of its keys made)."""
    data = _read(run_dir, whole=False)
    if data is None:
        data = _made_keys(run_dir)
    return Letters(data["outcome"], data["keys_digest"])


class RunKeys(NamedTuple):
    """A run's letters and keys' digest, and each cell's logical key in the same order: what
    history reads of the first run of its keys."""

    letters: str
    keys_digest: str
    keys: list[Key]


def keys(run_dir: Path) -> RunKeys:
    """The run's letters and logical keys: from its snapshot (either kind) when current, else
    from the record (a snapshot of its keys made)."""
    data = _read(run_dir, whole=False, keys=True)
    if data is None:
        data = _made_keys(run_dir)
    return RunKeys(data["outcome"], data["keys_digest"], _logical_keys(data))


def _made_keys(run_dir: Path) -> dict[str, Any]:
    """The letters and key columns of the run (a document holding at least those), made from
    its record and kept as a snapshot of its ``KEYS``; where the one-pass reading gives up
    (a line the harness would not write), the whole snapshot made as ``load`` makes it."""
    made_from = stamp(run_dir)
    document = _from_record(run_dir, keys_only=True) if made_from is not None else None
    if made_from is None or document is None:
        return load(run_dir)._data
    _store(run_dir, _body(document), made_from, KEYS)
    return document


def _letters_whole(data: Any) -> bool:
    """The second line: the format, a letter per cell, the keys' digest."""
    letters = data["outcome"]
    return (data["format"] == VERSION and isinstance(letters, str)
            and set(letters) <= FROM_LETTER.keys() and data["cells"] == len(letters)
            and isinstance(data["keys_digest"], str))


def _columns_whole(data: Any) -> bool:
    """The rest, after a whole letters line: every column there, of its type and of the
    letters' length, every code an index into its table."""
    cells, n = data["cell_id"], len(data["outcome"])
    if not (isinstance(cells, list) and len(cells) == n and set(map(type, cells)) <= {str}
            and isinstance(data["duration"], list) and len(data["duration"]) == n
            and set(map(type, data["duration"])) <= {int, float}):
        return False
    return all(_tabled_whole(data, name, n) for name in TABLED)


def _keys_whole(data: Any) -> bool:
    """The rest of a snapshot of the keys, after a whole letters line: the key columns."""
    return all(_tabled_whole(data, name, len(data["outcome"])) for name in KEYED)


def _tabled_whole(data: Any, name: str, n: int) -> bool:
    """The column ``name`` (one of ``TABLED``): its table of its type, ``n`` codes that index
    it."""
    table, codes = data["tables"][name], data["codes"][name]
    kinds = {dict} if name in ("values", "versions") else (
        {str, type(None)} if name == "signature" else {str})
    return (isinstance(table, list) and set(map(type, table)) <= kinds
            and isinstance(codes, list) and len(codes) == n
            and set(map(type, codes)) <= {int}
            and (not codes or (min(codes) >= 0 and max(codes) < len(table))))


def load(run_dir: Path) -> Snapshot:
    """The run's snapshot: as written if current, else made from the record (and written,
    for the next reader)."""
    found = read(run_dir)
    if found is not None:
        return found
    made_from = stamp(run_dir)
    if made_from is None:
        return Snapshot(_document([]))
    document = _from_record(run_dir)
    if document is None:  # a line the harness would not write: read as RunStore reads it
        store = RunStore(run_dir)
        document = _document(store.results())
        if store.damaged:  # none kept: each reader reads the record, and says so
            return Snapshot(document)
    _store(run_dir, _body(document), made_from)
    return Snapshot(document)


class _Line(msgspec.Struct):
    """What a snapshot reads of a result line: the fields ``adopt`` requires (a line without
    one is no result), typed as the harness writes them, and the fields the snapshot keeps.
    The others are skipped unread; ``values`` is kept as its text, decoded once per distinct
    text (a fleet's 100,000 lines hold a few thousand)."""

    run_id: str
    cell_id: str
    environment: str
    values: msgspec.Raw
    env_key: str
    backend: str
    case_id: str
    variant: str
    nodeid: str
    hardware_target: str
    outcome: Outcome
    signature: str | None = None
    fingerprint: Any = {}  # msgspec copies an empty default for each line
    duration: int | float = 0.0  # as written: an int stays an int, as json reads it
    # Not kept, checked (``results.damage``): a line that holds another type is no result.
    reason: str = ""
    log: str | None = None
    finished_at: int | float = 0.0
    caveat: str = ""
    attempt: int = 1
    node: str = ""
    gpu: int | None = None
    infra: bool = False
    parent: str = ""


_LINE = msgspec.json.Decoder(_Line)
_VALUES = attrgetter("values")
_NO_TEXT = msgspec.Raw()


def _from_record(run_dir: Path, *, keys_only: bool = False) -> dict[str, Any] | None:
    """The snapshot's document made from the record, each line decoded into only what the
    snapshot keeps (msgspec: a fleet's record in 0.6-0.9 s, where decoding every field into
    dicts and making results of them, then the document, took 1.3-1.6 s), or None where any
    line is not one result as the harness writes it (torn, blank, two values, by hand,
    another type, NaN, a lone surrogate, bytes that are not UTF-8, a carriage return): then
    ``RunStore`` reads the record (skipping what is not a result) and the document is made
    from that, as it always was. ``keys_only``: the letters and the key columns alone
    (``KEYED``), of the same lines, as the whole document has them."""
    decoded = _decoded(run_dir)
    if decoded is None:
        return None
    lines, texts = decoded
    # Each cell at its first place, with its last attempt (as ``RunStore.results``).
    last = {line.cell_id: i for i, line in enumerate(lines)}
    if len(last) < len(lines):  # a cell retried
        lines, texts = [lines[i] for i in last.values()], [texts[i] for i in last.values()]
    if not lines:
        return _document([])

    def column(name: str) -> list[Any]:  # a column at a time, in C (transposing 100,000
        return list(map(attrgetter(name), lines))  # tuples of fields took twice as long)

    try:  # each distinct text once, as json reads it
        parsed = {text: jsonio.loads(text) for text in dict.fromkeys(texts)}
    except ValueError:  # (the keys alone too: where the whole would give up, they do)
        return None
    if keys_only:
        return _keyed([column(name) for name in KEYED], column("outcome"))
    fingerprints = column("fingerprint")
    names = {f for f in fingerprints if isinstance(f, str)}
    if names:  # named in shared.jsonl (RunStore.attempts: {} for a name it lacks)
        shared = {digest: value for digest, value, _ in read_shared(run_dir)}
        found_as = {name: shared.get(name, {}) for name in names}
        fingerprints = [found_as[f] if isinstance(f, str) else f for f in fingerprints]
    return _columns([column(name) for name in TABLED[:5]], list(map(parsed.__getitem__, texts)),
                    fingerprints, column("outcome"), column("cell_id"), column("duration"))


def _decoded(run_dir: Path) -> tuple[list[_Line], list[bytes]] | None:
    """Every line of the record decoded, and each one's ``values`` text; None where one is
    not one result as the harness writes it. Read a MiB at a time (``codec.CHUNK``)."""
    lines: list[_Line] = []
    texts: list[bytes] = []
    rest = b""
    try:
        with open(run_dir / RESULTS, "rb") as fh:
            while block := fh.read(codec.CHUNK):
                block = rest + block
                _check(block, block.rfind(b"\n") + 1)
                pieces = block.split(b"\n")
                rest = pieces.pop()  # after the last newline: the next block's first line
                _decode_lines(pieces, lines, texts)
        if rest:  # a last line without its newline
            _check(rest, len(rest))
            _decode_lines([rest], lines, texts)
    except (OSError, ValueError, msgspec.MsgspecError):
        return None
    return lines, texts


def _check(block: bytes, end: int) -> None:
    """ValueError where ``block``'s first ``end`` bytes hold what msgspec would pass over
    where RunStore's reading drops the line: bytes that are not UTF-8 in a field it skips
    (it checks only those it decodes), a carriage return (where a chunk fails, the store
    splits lines there)."""
    if block.find(b"\r", 0, end) >= 0:
        raise ValueError("a carriage return")
    if not block.isascii():  # (no copy: most records are ASCII)
        codecs.utf_8_decode(memoryview(block)[:end], "strict", True)  # UnicodeDecodeError


def _decode_lines(pieces: list[bytes], lines: list[_Line], texts: list[bytes]) -> None:
    """The lines ``pieces`` decoded onto ``lines``, their values' texts onto ``texts``;
    msgspec's DecodeError where one is not a result as the harness writes it."""
    found = list(map(_LINE.decode, pieces))
    texts += map(bytes, map(_VALUES, found))
    for line in found:  # a Raw holds its whole line: the record would be kept whole
        line.values = _NO_TEXT
    lines += found


def _document(results: Sequence[Tabled], names: Mapping[str, Any] | None = None
              ) -> dict[str, Any]:
    """The snapshot's JSON document: the columns of ``results`` (``names``: as ``write``)."""
    # A column at a time (in C): rows (``ResultRow``, what a merge and a report hold) are
    # slots read in place; a fleet's 100,000 in 0.10-0.11 s, against 0.13-0.16 s read in
    # one pass of every field, then transposed. (That pass is quicker for ``CellResult``s: a
    # record read through ``RunStore``, the lines a merge redacted; a fleet's snapshot of
    # them took 0.43-0.46 s this way against 0.34-0.37.)
    (*strings, values, fingerprints, outcomes, cell_ids, durations) = (
        list(map(attrgetter(name), results)) for name in (
            *TABLED[:5], "values", "fingerprint", "outcome", "cell_id", "duration"))
    if names is not None:  # each name once (one object a name: told apart by identity)
        named = {f: names.get(f, {}) for f in fingerprints if f.__class__ is str}
        if named:
            fingerprints = [named[f] if f.__class__ is str else f for f in fingerprints]
    return _columns(strings, values, fingerprints, outcomes, cell_ids, durations)


def _columns(strings: Sequence[Sequence[str | None]], values: Sequence[Any],
             fingerprints: Sequence[Any], outcomes: Sequence[Outcome], cell_ids: Sequence[str],
             durations: Sequence[float]) -> dict[str, Any]:
    """The document of the cells whose columns these are: ``strings`` those of ``TABLED``'s
    first five (environment, case, variant, hardware, signature), one entry a cell each."""
    tables: dict[str, list[Any]] = {name: [] for name in TABLED}
    codes = {name: _encode(column, tables[name])
             for name, column in zip(TABLED[:5], strings, strict=True)}
    codes["values"] = _encode_by(values, tables["values"], codes["environment"])
    codes["versions"] = _encode(fingerprints, tables["versions"], _items, convert=versions_of)
    return _assembled(tables, codes, "".join(map(LETTER.__getitem__, outcomes)),
                      list(cell_ids), list(durations))


def _assembled(tables: dict[str, list[Any]], codes: dict[str, list[int]], letters: str,
               cell_ids: list[str], durations: list[float]) -> dict[str, Any]:
    """The document of these columns: each of ``TABLED`` as its table and codes."""
    return {"format": VERSION, "cells": len(letters), "keys_digest": _digest(tables, codes),
            "outcome": letters, "cell_id": cell_ids, "duration": durations,
            "tables": tables, "codes": codes}


def _keyed(strings: Sequence[Sequence[str]], outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The document of a snapshot of the keys: the letters line and the key columns (of
    ``strings``, one per name of ``KEYED``), as ``_columns`` makes them."""
    tables: dict[str, list[Any]] = {name: [] for name in KEYED}
    codes = {name: _encode(column, tables[name])
             for name, column in zip(KEYED, strings, strict=True)}
    letters = "".join(map(LETTER.__getitem__, outcomes))
    return {"format": VERSION, "cells": len(letters), "keys_digest": _digest(tables, codes),
            "outcome": letters, "tables": tables, "codes": codes}


def _digest(tables: Mapping[str, list[Any]], codes: Mapping[str, list[int]]) -> str:
    """The digest of the key columns: runs of the same cells in the same order share it."""
    keys = hashlib.sha256()
    for name in KEYED:
        keys.update(orjson.dumps(tables[name]) + b"\0" + orjson.dumps(codes[name]) + b"\0")
    return keys.hexdigest()[:32]


class Parts:
    """The current snapshots of the runs a merge reads (its shards), and each cell's place in
    their columns, by its id. ``read_as``: each run's record as the merge read it; a
    snapshot made from another (the record grew meanwhile) is left out."""

    def __init__(self, run_dirs: Sequence[Path],
                 read_as: Mapping[Path, Stamp | None] | None = None) -> None:
        self.found: list[Snapshot] = []
        self.made_from: dict[Path, Stamp | None] = {}  # each run's, as its snapshot says
        for run in run_dirs:
            part = read(run)
            if part is not None and _plain(part) and (
                    read_as is None or read_as.get(run) == part.made_from):
                self.found.append(part)
                self.made_from[run] = part.made_from
        held: list[str] = []
        for part in self.found:
            held += part.cell_ids
        self.where = dict(zip(held, range(len(held)), strict=True))
        self.cells = len(held)
        self.shared = len(self.where) < len(held)  # a cell in two of them


def _plain(part: Snapshot) -> bool:
    """Whether every mapping of ``part``'s tables holds text alone, as the harness writes them.
    A value of another type (a hand edit) may equal another written otherwise (1 and True),
    and of two such the table keeps the first in the part's order, not in the merge's; or
    it may not be hashable: that part's cells are then read from the lines."""
    return all(set(map(type, value.values())) <= {str}
               for name in ("values", "versions") for value in part.table(name))


class Prepared(NamedTuple):
    """A merged run's snapshot made before the merge had chosen its cells (``prepared``): the
    letters it says (one a cell it was made for), the file but its first line, and each
    shard's record it was made from."""

    letters: str
    body: bytes
    made_from: Mapping[Path, Stamp | None]


def prepared(runs: Sequence[Path], ids: Sequence[str]) -> Prepared | None:
    """The snapshot of a merge of ``runs`` whose every cell, in the order ``ids``, is a line
    passed through as one of them wrote it, made from their snapshots while the merge reads
    their records (in the process that writes the merged run's folder, on the other core):
    a fleet's 4.7 MB, sent back whole. None where a cell is in none of them, or in two.
    ``write`` takes it only where the merge's cells turn out so (``Gathering.ready``)."""
    parts = Parts(runs)
    at = list(map(parts.where.get, ids))
    if not parts.found or parts.shared or None in at:
        return None
    document = _gather(parts, cast("list[int]", at), [], {}, list(ids))
    return Prepared(document["outcome"], _body(document), parts.made_from)


@dataclass(frozen=True)
class Gathering:
    """What a merged run's snapshot is gathered from (``write``): the ``runs`` it merged, no
    two of which hold one cell; each written cell's id and outcome letter, held apart from
    the results (a forked process that read them there would copy each page they sit on);
    the places of the cells whose line the merge wrote itself (a gap, a log that did not
    come along, a value held inline): those are read from the results; each run's record
    as the merge read it (``stamp``, taken before); and the snapshot ``prepared`` beside
    the reading, if any."""

    runs: Sequence[Path]
    ids: Sequence[str]
    letters: str
    own: Sequence[int]
    read_as: Mapping[Path, Stamp | None]
    prepared: Prepared | None = None

    @property
    def ready(self) -> bool:
        """Whether ``prepared`` is the snapshot: every cell a line passed through, each saying
        the outcome the shard's snapshot says, as many cells as it was made for (the plan's:
        a cell no plan names makes one more), of records the merge read as those snapshots
        were made from."""
        made = self.prepared
        return (made is not None and not self.own and len(made.letters) == len(self.ids)
                and made.letters == self.letters
                and all(self.read_as.get(run) == was for run, was in made.made_from.items()))


def _gathered(results: Sequence[Tabled], gathering: Gathering,
              names: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``_document(results, names)``, gathered from the snapshots of a merge's runs: each cell
    whose line it wrote as its shard wrote it is that shard's row (the same line's), and only
    its place in the shard's columns is looked up; the other cells (``own``; and a shard's
    without a current snapshot) add their own values. Made from a fleet's 100,000 merged
    lines in a forked process, ``_document`` read every field of each, copying each page
    they sat on (0.7-0.85 s; this: 0.25-0.3 s). None where the shards' snapshots hold fewer
    than half the cells, or say another outcome than a line (``_document`` then makes it)."""
    parts, ids = Parts(gathering.runs, gathering.read_as), gathering.ids
    if not parts.found or parts.shared:
        return None
    at: list[int | None] = list(map(parts.where.get, ids))
    for cell in gathering.own:
        at[cell] = None
    own = [cell for cell, place in enumerate(at) if place is None] if None in at else []
    if 2 * len(own) > len(at):
        return None
    for place, cell in enumerate(own, parts.cells):  # its own values after the shards' rows
        at[cell] = place
    document = _gather(parts, cast("list[int]", at), [results[cell] for cell in own],
                       names or {}, list(ids), [gathering.letters[cell] for cell in own])
    if document["outcome"] != gathering.letters:
        return None  # (a snapshot that is not its record's: the lines say)
    return document


def _gather(parts: Parts, places: list[int], rest: Sequence[Tabled], names: Mapping[str, Any],
            ids: list[str], letters: Sequence[str] = ()) -> dict[str, Any]:
    """The document of the cells at ``places`` in the columns of ``parts`` and then of
    ``rest`` (results, with their ``letters``; ``names``: as ``write``'s), each column made
    again from those places, in C."""
    fingerprints = [names.get(f, {}) if f.__class__ is str else f
                    for f in map(_FINGERPRINT, rest)]
    versions: dict[int, dict[str, str]] = {}  # each fingerprint once (its cells share it)
    ours = {**{name: list(map(attrgetter(name), rest)) for name in TABLED[:6]},
            "versions": [versions.get(id(fp)) or versions.setdefault(id(fp), versions_of(fp))
                         for fp in fingerprints]}
    tables: dict[str, list[Any]] = {}
    codes: dict[str, list[int]] = {}
    for name in TABLED:  # the parts' tables one after the other, each code moved with its own
        table: list[Any] = []
        joined: list[int] = []
        for part in parts.found:  # (each code an int made once an entry, not once a cell)
            moved = list(range(len(table), len(table) + len(part.table(name))))
            joined += map(moved.__getitem__, part.codes(name))
            table += part.table(name)
        joined += range(len(table), len(table) + len(rest))
        table += ours[name]
        tables[name], codes[name] = _recoded(list(map(joined.__getitem__, places)), table,
                                             _items if name in ("values", "versions") else None)
    durations: list[float] = []
    for part in parts.found:
        durations += part.durations
    durations += map(_DURATION, rest)
    held = "".join([*(part.letters for part in parts.found), *letters])
    return _assembled(tables, codes, "".join(map(held.__getitem__, places)), ids,
                      list(map(durations.__getitem__, places)))


def letters_of(results: Iterable[Tabled]) -> str:
    """Each result's outcome letter, as the snapshot holds it."""
    return "".join(map(LETTER.__getitem__, map(_OUTCOME, results)))


def _recoded(codes: list[int], table: list[Any], key: Callable[[Any], Hashable] | None
             ) -> tuple[list[Any], list[int]]:
    """The table and codes ``_encode(values, [], key)`` makes of the values ``[table[c] for c
    in codes]``: each entry that ``codes`` reaches told apart by its content once, not once
    a cell."""
    first = dict.fromkeys(codes, 0)  # each entry reached, in the order first reached
    out: list[Any] = []
    by_key: dict[Hashable, int] = {}
    try:
        for code in first:
            value = table[code]
            found = by_key.setdefault(value if key is None else key(value), len(out))
            if found == len(out):
                out.append(value)
            first[code] = found
    except TypeError:
        if key is not None:
            raise
        return _recoded(codes, table, _as_json)  # a list where text belongs: as _encode does
    return out, list(map(first.__getitem__, codes))


#: What ``_gathered`` reads of a result.
_OUTCOME, _FINGERPRINT, _DURATION = (attrgetter(name) for name in (
    "outcome", "fingerprint", "duration"))


def head(made_from: Stamp, what: str = "snapshot", version: int = VERSION) -> bytes:
    """The first line of a file made from the record as ``made_from`` found it: ``what`` it
    is, in which format (the snapshot; ``report_rows``' columns)."""
    return f"# {RESULTS} {made_from[0]} {made_from[1]} {what} {version}\n".encode()


def _items(value: Mapping[str, Any]) -> Hashable:
    # In the mapping's order: two equal mappings in two orders are two entries of the table,
    # which costs a few bytes; sorting 100,000 of them cost a merge 0.4 s.
    try:
        return tuple(value.items())
    except AttributeError:  # not a mapping (a hand-written record's null)
        return _as_json(value)


def _as_json(value: Any) -> Hashable:
    return jsonio.dumps(value)


def _encode_by(values: Sequence[Any], table: list[Any], groups: Sequence[int]) -> list[int]:
    """``_encode(values, table, _items)``, where the cells of each group (an environment's:
    ``groups``, their codes) hold equal mappings, as the harness writes them: each cell's
    mapping compared with its group's first (in C: equal, and its keys in the same order),
    and only the groups' firsts told apart by their items. A merge's 100,000 cells each
    hold a mapping of their own (decoded from its line), and making each one's items a key
    was two thirds of its snapshot. Where a group's cells differ, or a cell holds anything
    but a mapping (a hand-written record's), each cell's is told apart as ``_encode`` does."""
    if not values or not set(map(type, values)) <= {dict}:  # (a list [1] == [True])
        return _encode(values, table, _items)
    first = dict(zip(reversed(groups), range(len(groups) - 1, -1, -1), strict=True))
    firsts = list(map(first.__getitem__, groups))  # each cell's group's first cell
    ours = list(map(values.__getitem__, firsts))
    if not (all(map(eq, values, ours)) and all(map(eq, map(tuple, values), map(tuple, ours)))):
        return _encode(values, table, _items)
    # The groups in the order of their first cells: each distinct mapping first met at the
    # first cell of the first group that holds it, as ``_encode`` meets it over the cells.
    order = sorted(first.values())
    coded = dict(zip(order, _encode([values[i] for i in order], table, _items), strict=True))
    return list(map(coded.__getitem__, firsts))


def _encode(values: Sequence[Any], table: list[Any], key: Callable[[Any], Hashable] | None = None,
            convert: Callable[[Any], Any] = lambda v: v) -> list[int]:
    """Each value's index in ``table``, which gets each distinct value once. Without ``key``:
    hashable values, told apart by equality. With it: mappings, which a record's cells mostly
    share as one object (an environment's fingerprint): told apart by identity first, then
    each distinct object ``convert``ed and told apart by ``key`` of that. Loops over the
    cells run in C (``map``): a merge makes a fleet's snapshot in a tenth of a second."""
    if key is None:
        try:
            start = len(table)
            table.extend(dict.fromkeys(values))
            index = {v: i for i, v in enumerate(table[start:], start)}
            return list(map(index.__getitem__, values))
        except TypeError:  # a hand-written record's list or mapping where text belongs
            del table[start:]
            return _encode(values, table, _as_json)
    objects = dict(zip(map(id, values), values, strict=True))  # alive: ``values`` holds them
    by_content: dict[Hashable, int] = {}
    by_id: dict[int, int] = {}
    for ident, value in objects.items():
        converted = convert(value)
        found = by_id[ident] = by_content.setdefault(key(converted), len(by_content))
        if found == len(table):
            table.append(converted)
    return list(map(by_id.__getitem__, map(id, values)))
