"""Safe YAML loading that remembers the line of every key, so errors can point at it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from harness.errors import SpecError

PathPart = str | int
KeyPath = tuple[PathPart, ...]


def format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Source:
    """Parsed YAML plus where each key path came from."""

    file: str
    data: Any
    lines: dict[KeyPath, int]

    def line(self, path: KeyPath) -> int | None:
        # A missing path (a key that should be there) points at its nearest present parent.
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)

    def error(self, path: KeyPath, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=self.line(path), path=format_path(path))


def load_source(text: str, file: str) -> Source:
    """Parse YAML text with the safe loader, rejecting duplicate keys."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise SpecError(f"malformed YAML: {problem}", file=file, line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"malformed YAML: {exc}", file=file, line=None) from None
    lines: dict[KeyPath, int] = {}
    data = _convert(root, (), lines, file) if root is not None else None
    return Source(file=file, data=data, lines=lines)


def _convert(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], file: str) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node, file)
            if key in out:
                raise SpecError(
                    f"duplicate key {key!r}", file=file, line=key_node.start_mark.line + 1,
                    path=format_path((*path, key)),
                )
            out[key] = _convert(value_node, (*path, key), lines, file)
            lines[(*path, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), lines, file) for i, item in enumerate(node.value)]
    return _scalar(node, file)


def _scalar(node: yaml.Node, file: str) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise SpecError("keys must be plain scalars", file=file, line=node.start_mark.line + 1)
    return yaml.SafeLoader(" ").construct_object(node)
