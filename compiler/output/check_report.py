"""What `compile --check` says about an output folder that is not what the spec compiles to: each file
that differs, and for a changed file its first changed lines (a unified diff without context)."""

from __future__ import annotations

import difflib
import unicodedata
from dataclasses import dataclass

from compiler.output.emit import Difference

MAX_LINES = 8  # changed lines shown per file
MAX_WIDTH = 160

_WHAT = {
    "missing": "missing from the output folder",
    "stale": "this spec does not produce it (an earlier compile wrote it, or it was put there by hand)",
    "unfinished": "a compile was killed while writing; compile again to finish",
    "link": "a symbolic link where sparkc or its scripts write: writes would land where it points; remove it",
}


@dataclass(frozen=True)
class Explained:
    file: str
    kind: str  # missing, differs, stale, unfinished or link
    lines: tuple[str, ...]  # for `differs`: `@@ -N +N @@` headers, `-found` and `+expected` lines

    def as_json(self) -> dict[str, object]:
        return {"file": self.file, "kind": self.kind, "lines": list(self.lines)}


def explain(differences: list[Difference], files: dict[str, str]) -> list[Explained]:
    return [Explained(d.name, d.kind, _changed_lines(d, files)) for d in differences]


def as_text(explained: list[Explained]) -> str:
    out = []
    for e in explained:
        out.append(f"  {e.file}: {_WHAT.get(e.kind, 'differs')}")
        out += [f"    {line}" for line in e.lines]
    return "\n".join(out)


def _changed_lines(d: Difference, files: dict[str, str]) -> tuple[str, ...]:
    if d.kind != "differs" or d.found is None:
        return ()
    found = d.found.decode("utf-8", "replace").splitlines()
    diff = [
        line
        for line in difflib.unified_diff(found, files[d.name].splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++"))
    ]
    shown = [_printable(line) for line in diff[:MAX_LINES]]
    if len(diff) > MAX_LINES:
        shown.append(f"... {len(diff) - MAX_LINES} more diff lines")
    return tuple(shown)


def _printable(line: str) -> str:
    """A line of a file as it may be shown on a terminal: control characters as `?`, cut to MAX_WIDTH."""
    clean = "".join("?" if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in line)
    return clean if len(clean) <= MAX_WIDTH else clean[: MAX_WIDTH - 3] + "..."
