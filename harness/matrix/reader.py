"""matrix.yaml read safely (hostile input refused), with the line of every key and typed access
to its values: each checked, each failure a one-line SpecError at its line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from harness.core import backends
from harness.core.errors import SpecError
from harness.core.matrix import CaseSelector
from harness.matrix.releases import valid_specifier

KeyPath = tuple[str | int, ...]
MAX_TIMEOUT = 7 * 24 * 3600  # a week: a longer timeout is a typo


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Source:
    """Parsed YAML, where each key path came from, and its values read as the types asked for."""

    file: str
    data: Any
    lines: dict[KeyPath, int]

    def line(self, path: KeyPath) -> int | None:
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)  # a missing path: its nearest present parent's

    def error(self, path: KeyPath, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=self.line(path), path=format_path(path))

    def at(self, path: KeyPath) -> Any:
        node = self.data
        for part in path:
            in_dict = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
            if not (in_dict or in_list):
                return None
            node = node[part]
        return node

    def mapping(self, path: KeyPath, allowed: set[str] | None, *, optional: bool = False
                ) -> dict[str, Any]:
        value = self.at(path)
        if value is None and (optional or not path):
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping, got {kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.error((*path, key), f"keys must be strings, got {kind(key)}")
            if allowed is not None and key not in allowed:
                raise self.error((*path, key), f"unknown key {key!r}; expected one of: "
                                 + ", ".join(sorted(allowed)))
        return value

    def string(self, path: KeyPath, value: Any, *, what: str = "a string") -> str:
        if isinstance(value, bool) or value is None or isinstance(value, list | dict):
            raise self.error(path, f"expected {what}, got {kind(value)}")
        if isinstance(value, int | float):
            shown = repr(value) if len(repr(value)) <= 20 else kind(value)
            raise self.error(path, f"{shown} is a number; quote it ('{shown}') so that "
                             "YAML keeps it exactly as written")
        return self.printable(path, str(value))

    def printable(self, path: KeyPath, text: str) -> str:
        if any(not c.isprintable() for c in text):
            raise self.error(path, f"{text!r} holds a control character")
        return text

    def strings(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise self.error(path, f"expected a list of strings, got {kind(value)}")
        return tuple(self.string((*path, i), v) for i, v in enumerate(value))

    def each(self, path: KeyPath, value: Any, ok: Callable[[str], object], why: str
             ) -> tuple[str, ...]:
        """``strings``, each ``ok``; else ``why`` (``{}``: its text) at its own line."""
        items = self.strings(path, value)
        for i, item in enumerate(items):
            if not ok(item):
                raise self.error(path if isinstance(value, str) else (*path, i),
                                 why.format(repr(item)))
        return items

    def number(self, path: KeyPath, value: Any, ok: Callable[[Any], bool], what: str, *,
               floats: bool = False, shown: Callable[[Any], str] | None = None) -> Any:
        types = int | float if floats else int
        if isinstance(value, bool) or not isinstance(value, types) or not ok(value):
            raise self.error(path, f"expected {what}, got {(shown or kind)(value)}")
        return value

    def boolean(self, path: KeyPath, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"expected true or false, got {kind(value)}")
        return value

    def checked(self, path: KeyPath, value: Any, ok: Callable[[str], object], why: str, *,
                what: str = "a string") -> str:
        """A string (else ``what`` was expected) that is ``ok``; else ``why`` (``{}``: it)."""
        text = self.string(path, value, what=what)
        if not ok(text):
            raise self.error(path, why.format(repr(text)))
        return text

    def matching(self, path: KeyPath, value: Any, pattern: str, what: str) -> str:
        return self.checked(path, value, re.compile(pattern).fullmatch, "{} is not " + what)

    def backend(self, path: KeyPath, value: Any) -> str:
        return self.checked(path, value, backends.REGISTRY.__contains__, "unknown backend {}; "
                            "valid: " + ", ".join(backends.backend_names()))

    def packages(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        lines = self.strings(path, value)
        for i, line in enumerate(lines):
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise self.error((*path, i), f"{line!r} is not a requirement: {exc}") from None
        return lines

    def env(self, path: KeyPath, value: Any) -> tuple[tuple[str, str], ...]:
        return tuple((k, self.string((*path, k), v))
                     for k, v in self.mapping(path, None).items())

    def timeout(self, path: KeyPath, value: Any) -> float:
        return float(self.number(path, value, lambda v: 0 < v <= MAX_TIMEOUT, floats=True,
                                 what=f"a positive number of seconds up to {MAX_TIMEOUT:,}"))

    def cases(self, path: KeyPath, value: Any) -> tuple[CaseSelector, ...]:
        return tuple(CaseSelector(pattern=p, where=f"{self.file}:{self.line((*path, i))}: "
                                  f"{format_path((*path, i))}")
                     for i, p in enumerate(self.strings(path, value)))

    def distribution(self, path: KeyPath, value: Any) -> str:
        """A distribution name, extras allowed (``transformer-engine[pytorch]``)."""
        return self.checked(path, value, _distribution_name, "{} is not a distribution name "
                            "like 'transformer-engine[pytorch]'")

    def specifier(self, path: KeyPath, value: Any, like: str) -> str:
        what = f"a version specifier like {like!r}"
        return self.checked(path, value, valid_specifier, "{} is not " + what, what=what)


def _distribution_name(text: str) -> bool:
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return False
    return not requirement.specifier and not requirement.url


MAX_DEPTH = 64  # a matrix needs about 8
MAX_CHARS = 10_000  # the longest value: a URL is a few hundred characters
MAX_NODES = 50_000  # values a file may hold (aliases expanded) at least


def value_limit(max_cells: int) -> int:
    """Half the cell limit, ``MAX_NODES`` at least: ``--max-cells`` raises both."""
    return max(MAX_NODES, max_cells // 2)


#: libyaml's parser when PyYAML was built with it.
_EVENT_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_source(text: str, file: str, *, max_values: int = MAX_NODES) -> Source:
    """``text`` parsed safely; duplicate keys and more than ``max_values`` values refused."""
    well_formed = _count_values(text, file, max_values)
    lines: dict[KeyPath, int] = {}
    try:
        # libyaml for a well-formed text; the pure-Python loader says where a malformed one fails
        loader = _EVENT_LOADER(text) if well_formed else yaml.SafeLoader(text)
        loader.name = file
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
        # The converter's constructor refuses a tag or value with a MarkedYAMLError too.
        data = _Converter(file, lines, max_values).convert(root, ()) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        raise SpecError(f"malformed YAML: {exc.problem or exc.context or 'malformed YAML'}",
                        file=file, line=_line(exc.problem_mark or exc.context_mark)) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (ESC, NUL, ...)
        raise SpecError(f"malformed YAML: character {exc.character!r} is not allowed", file=file,
                        line=text[: exc.position].count("\n") + 1) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML: {exc}", file=file, line=None) from None
    return Source(file=file, data=data, lines=lines)


def _count_values(text: str, file: str, limit: int) -> bool:
    """Whether ``text`` is well-formed YAML; refused past ``limit`` values (keys apart),
    ``MAX_DEPTH`` levels or ``MAX_CHARS`` a value."""
    values = 0
    # Per open collection: whether it is a mapping, and its nodes so far (every other a key).
    open_: list[list[Any]] = []
    try:
        for event in yaml.parse(text, Loader=_EVENT_LOADER):
            if isinstance(event, yaml.CollectionEndEvent):
                open_.pop()
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            is_key = bool(open_) and open_[-1][0] and open_[-1][1] % 2 == 0
            if open_:
                open_[-1][1] += 1
            if not is_key:
                values += 1
                if values > limit:
                    raise SpecError(f"more than {limit:,} values, past the limit for a "
                                    "matrix (raise it with --max-cells: half of it, "
                                    f"{MAX_NODES:,} at least)", file=file,
                                    line=_line(event.start_mark))
            if isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_CHARS:
                raise SpecError(f"a value of {len(event.value):,} characters, over the limit "
                                f"of {MAX_CHARS:,}", file=file, line=_line(event.start_mark))
            if isinstance(event, yaml.CollectionStartEvent):
                open_.append([isinstance(event, yaml.MappingStartEvent), 0])
                if len(open_) > MAX_DEPTH:
                    raise SpecError(f"nested more than {MAX_DEPTH} levels deep", file=file,
                                    line=_line(event.start_mark))
    except yaml.MarkedYAMLError as exc:
        # libyaml's own cap (1,000 levels), met while it looks ahead past ours
        if "nesting depth" in (exc.problem or ""):
            raise SpecError(f"nested more than {MAX_DEPTH} levels deep", file=file,
                            line=_line(exc.problem_mark)) from None
        return False  # malformed: the loader below says where, in its own words
    except yaml.YAMLError:
        return False
    return True


def _line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


class _Converter:
    def __init__(self, file: str, lines: dict[KeyPath, int], limit: int) -> None:
        self.file, self.lines, self.limit = file, lines, limit
        self.nodes = 0
        self.constructor = yaml.SafeLoader("")  # one for every scalar
        self.open: set[int] = set()  # nodes being converted: an alias back to one is a cycle

    def error(self, node: yaml.Node, path: KeyPath, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=node.start_mark.line + 1,
                         path=format_path(path))

    def convert(self, node: yaml.Node, path: KeyPath) -> Any:
        self.nodes += 1
        if self.nodes > self.limit:
            raise self.error(node, path, f"more than {self.limit:,} values once aliases are "
                             "expanded")
        if id(node) in self.open:
            raise self.error(node, path, "an alias refers to a value that contains it")
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.SequenceNode):
            self.open.add(id(node))
            items = [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
            self.open.discard(id(node))
            return items
        if not isinstance(node, yaml.MappingNode):
            return self.scalar(node)
        self.open.add(id(node))
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.error(key_node, path, "merge keys (<<) are not supported; write the "
                                 "keys out")
            key = self.scalar(key_node)
            if key in out:
                raise self.error(key_node, (*path, key), f"duplicate key {key!r}")
            out[key] = self.convert(value_node, (*path, key))
            self.lines[(*path, key)] = key_node.start_mark.line + 1
        self.open.discard(id(node))
        return out

    def scalar(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, (), "keys must be plain scalars")
        if node.tag == "tag:yaml.org,2002:str":  # most of a matrix, as the constructor makes it
            return node.value
        return self.constructor.construct_object(node)


def kind(value: Any) -> str:
    """A value as a one-line message names it."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10 ** 12:
        return f"a number of {len(str(abs(value)))} digits"
    if isinstance(value, int | float):
        return f"a number ({value})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"
