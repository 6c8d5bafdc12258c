"""Load a spec file: YAML with positions kept, every syntax problem and duplicate key reported."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from compiler.diagnostics import Diagnostic, Path, Severity


@dataclass(frozen=True)
class Document:
    """The spec as loaded: `data` keeps ruamel's position info for `locate`."""

    filename: str
    text: str
    data: Any


def _yaml() -> YAML:
    # A fresh round-trip loader per call: no global state, positions kept on every mapping and list.
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True  # duplicates are found and reported by `_duplicates`, all of them
    return yaml


def load_text(text: str, filename: str) -> tuple[Document, list[Diagnostic]]:
    try:
        root = _yaml().compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        return Document(filename, text, None), [
            Diagnostic((), f"YAML syntax error: {message}", Severity.ERROR, line, col, True)
        ]
    diagnostics = list(_duplicates(root, ()))
    data = _yaml().load(text) if root is not None else None
    if not isinstance(data, CommentedMap):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        diagnostics.append(Diagnostic((), f"the spec must be a mapping of sections, found {found}",
                                      Severity.ERROR, 1, 1, True))
    return Document(filename, text, data), diagnostics


def _duplicates(node: Node | None, path: Path) -> Iterator[Diagnostic]:
    if isinstance(node, MappingNode):
        seen: dict[Any, Node] = {}
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            if isinstance(key, str) and key in seen:
                first = seen[key].start_mark
                mark = key_node.start_mark
                yield Diagnostic(path + (key,), f"duplicate key '{key}' (first defined at line {first.line + 1})",
                                 Severity.ERROR, mark.line + 1, mark.column + 1, True)
            elif isinstance(key, str):
                seen[key] = key_node
            yield from _duplicates(value_node, path + (str(key),))
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicates(item, path + (index,))


def locate(data: Any, path: Path, at_key: bool = False) -> tuple[int, int]:
    """1-based line and column of `path` in a loaded document; the nearest existing parent if absent."""
    node = data
    line, col = (node.lc.line + 1, node.lc.col + 1) if hasattr(node, "lc") else (1, 1)
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, CommentedMap) and part in node:
            key_line, key_col = node.lc.key(part)
            value_line, value_col = node.lc.value(part)
            line, col = (key_line + 1, key_col + 1) if (last and at_key) else (value_line + 1, value_col + 1)
            if not last:
                line, col = key_line + 1, key_col + 1
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            item_line, item_col = node.lc.item(part)
            line, col = item_line + 1, item_col + 1
            node = node[part]
        else:
            break
    return line, col


def to_plain(value: Any) -> Any:
    """ruamel's types to plain dicts, lists, str, int, float, bool: what the later stages work on."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value
