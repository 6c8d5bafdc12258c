"""A deployment.sh constant as typed data, and how one is written in bash: one function quotes every value, so
no template or caller writes an assignment by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compiler.output.bash_words import comment, lines, quote
from compiler.plan import Command, NodePlan, PortWord

# A constant's value: one word (str, int, bool: 1 or 0), a list of words (one a line), a command (one group of
# words a line), or a value per node (a read-only associative array keyed by node name).
Value = str | int | bool | tuple[str, ...] | list[str] | Command | Mapping[str, str | int | bool]


@dataclass(frozen=True)
class Constant:
    name: str
    value: Value
    why: str = ""  # the comment above it; "" where the name says it all
    command: bool = False  # a list of word groups, one group a line
    mutable: bool = False  # an option of the script may change it (--no-probe)
    by_name: bool = False  # read through a name reference (compiled_run): shellcheck cannot see the read
    notes: Mapping[int, str] | None = None  # a command's comment lines, each before the group of its index
    packed: bool = False  # a long list of short words: as many a line as fit in WIDTH


@dataclass(frozen=True)
class Code:
    """Lines of bash between the constants, as they are (no value of the spec in them)."""

    text: str


Entry = Constant | Code


def node_map(nodes: Iterable[NodePlan], field: str) -> dict[str, str | int | bool]:
    return {n.name: getattr(n, field) for n in nodes}


def assignment(c: Constant, placeholder: bool) -> str:
    keyword = "" if c.mutable else "readonly "
    value = c.value
    if isinstance(value, Mapping):
        body = "".join(f"  [{quote(k)}]={'v' if placeholder else quote(v)}\n" for k, v in value.items())
        return f"declare -{'A' if c.mutable else 'rA'} {c.name}=(\n{body})"
    if isinstance(value, (tuple, list)):
        if placeholder:
            return f"{keyword}{c.name}=(v)"
        if not value:
            return f"{keyword}{c.name}=()"
        if c.command:
            notes = c.notes or {}
            body = "\n".join(
                (f"  # {comment(notes[k])}\n" if k in notes else "") + lines([g]) for k, g in enumerate(value)
            )
        elif c.packed:
            body = "\n".join(packed_lines([quote(w) for w in value]))
        else:
            body = "\n".join("  " + quote(w) for w in value)
        return f"{keyword}{c.name}=(\n{body}\n)"
    return f"{keyword}{c.name}={'v' if placeholder else quote(value)}"


WIDTH = 110


def packed_lines(items: list[str]) -> list[str]:
    out = ["  "]
    for item in items:
        if len(out[-1]) + len(item) > WIDTH:
            out.append("  ")
        out[-1] += ("" if out[-1] == "  " else " ") + item
    return out


def port_places(words: Iterable[PortWord], position: Mapping[tuple[int, int], int]) -> str:
    """`INDEX:PREFIX` items, space-separated: the launcher writes PREFIX and the port at INDEX."""
    return " ".join(f"{position[(p.group, p.word)]}:{p.prefix}" for p in words)


def positions(command: Command) -> dict[tuple[int, int], int]:
    """(group, word) of `command` to its index among the command's words."""
    at, i = {}, 0
    for g, group in enumerate(command):
        for w in range(len(group)):
            at[(g, w)] = i
            i += 1
    return at
