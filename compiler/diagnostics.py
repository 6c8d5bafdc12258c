"""Diagnostics: what is wrong with a spec, where, and how to say it (text or JSON).

Every stage reports problems against a *path* into the spec (a tuple of keys and indexes); only
`locate` turns a path into a line and column, so resolve never needs to know about YAML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Path = tuple[str | int, ...]
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    path: Path
    message: str
    severity: Severity = Severity.ERROR
    line: int = 0  # 1-based; 0 = unknown (filled in by `locate`)
    column: int = 0
    # Set when the position is already known (YAML syntax errors, duplicate keys).
    fixed_position: bool = field(default=False, compare=False)
    # Point at the key itself rather than its value (unknown keys).
    at_key: bool = field(default=False, compare=False)
    # The file the position is in, where it is not the spec itself (an included cluster file).
    file: str = ""


def error(path: Path, message: str) -> Diagnostic:
    return Diagnostic(tuple(path), message, Severity.ERROR)


def warning(path: Path, message: str) -> Diagnostic:
    return Diagnostic(tuple(path), message, Severity.WARNING)


def display_path(path: Path, document: Any) -> str:
    """`cluster.nodes[spark-b].fabric.ip`: list items are named by their `name` where they have one."""
    text = ""
    node = document
    for part in path:
        if isinstance(part, int):
            label = str(part)
            item = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
                label = item["name"]
            text += f"[{label}]"
            node = item
        else:
            text += f".{show_key(part)}" if text else show_key(part)
            node = node.get(part) if isinstance(node, dict) else None
    return text or "(top)"


def show_key(key: str, always: bool = False) -> str:
    """A key as it can be printed on one line: quoted (newlines and quotes escaped) unless it is a plain word."""
    if not always and _PLAIN_KEY.fullmatch(key):
        return key
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in key)
    return "'" + shown.replace("'", "''") + "'"  # YAML's own way to put a quote inside single quotes


def printable(text: str) -> str:
    """Text read from a file or a node, as it may be printed on a terminal or in a one-line comment: each
    character that is not printable (line breaks, ESC, NUL, DEL, C1 controls, bidi overrides) is written
    as its Python escape (`\\x1b`), so it can neither move the cursor nor end the line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.file, d.line, d.column, d.message)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def format_text(diagnostics: Iterable[Diagnostic], filename: str, document: Any) -> str:
    lines = []
    for d in sorted(diagnostics, key=sort_key):
        where = f"{d.file or filename}:{d.line}:{d.column}" if d.line else d.file or filename
        prefix = "" if d.severity is Severity.ERROR else "warning: "
        lines.append(printable(f"{where}: {display_path(d.path, document)}: {prefix}{d.message}"))
    return "\n".join(lines)


def format_json(diagnostics: Iterable[Diagnostic], filename: str, document: Any) -> str:
    items = [
        {
            "file": d.file or filename,
            "line": d.line,
            "column": d.column,
            "path": display_path(d.path, document),
            "severity": d.severity.value,
            "message": d.message,
        }
        for d in sorted(diagnostics, key=sort_key)
    ]
    return json.dumps({"diagnostics": items}, indent=2, sort_keys=True)
