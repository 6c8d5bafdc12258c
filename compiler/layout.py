"""Where a rendered script's values sit, so that lint can check the spec's part and sparkc's part apart.

A generated script is template text and library code (templates/lib/, copied verbatim), which are the same
for every spec, with the spec's values in between, each written by one of the value filters (q, words,
lines, comment, json). Rendering the scripts once more with those filters and `bash()` marking what they
write gives, for each script:

- `values`: the script with the library code left out, every value as written: what the values can break.
- `shape`: the whole script with every value replaced by a placeholder of the same kind (a word, an array):
  the same names, kinds and code as the script, and the same text for every spec of that shape, so that
  its check is done once and remembered.
- `chunks`: the values cut between top-level statements, each ending with a statement that reads the
  constants it assigns: an edit changes a few of them, and only those are checked again. A chunk is only ever a way to
  find the values clean sooner: where one has findings, the values are checked whole and that check counts.

The marked render is only used where taking the marks out gives back exactly the script that was rendered
without them: a value that held a mark's character (or any other surprise) leaves the script unsplit, and
it is checked whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

# Control characters no template or library file holds (a value holding one is refused by the rules, and
# anyway leaves its script unsplit): a value is OPEN, its filter's letter, the text, CLOSE; library code
# is LIBRARY, the text, END.
OPEN, CLOSE, LIBRARY, END = "\x01", "\x02", "\x03", "\x04"
_MARK = re.compile("[\x01-\x04]")
_MARKS = re.compile("\x01.|[\x02-\x04]", re.S)
# What a value becomes in the shape, by filter: an array for `words`, an array's line for `lines`.
PLACEHOLDERS: dict[str, str] = {"q": "v", "w": "(v)", "l": "  v", "c": "v", "j": "v"}
# A top-level assignment of the template's own text: `readonly X=`, `declare -rA X=(`, `X=`.
_ASSIGNMENT = re.compile(r"^(?:readonly\s+|declare\s+-([A-Za-z]+)\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\()?", re.M)

# The spec's digest (in a comment and in a constant) changes with every edit. 64 hex digits, bare or in single
# quotes, are one literal word to the shell wherever a filter writes them, so the values are checked with a
# fixed digest in their place, and an edit changes no piece for them.
_DIGEST = re.compile(r"('?)[0-9a-f]{64}\1")


def _fixed_digest(value: str) -> str:
    quote = _DIGEST.fullmatch(value)
    return f"{quote[1]}{'0' * 64}{quote[1]}" if quote else value


_marking: ContextVar[bool] = ContextVar("sparkc_layout_marking", default=False)


@contextmanager
def marking() -> Iterator[None]:
    token = _marking.set(True)
    try:
        yield
    finally:
        _marking.reset(token)


def unmarked(value: Any) -> Any:
    """A filter's input without the marks of a filter before it (`json | q`)."""
    return _MARKS.sub("", value) if isinstance(value, str) and _marking.get() else value


def value_filter(letter: str, function: Callable[..., str]) -> Callable[..., str]:
    """`function` as a template filter: its output marked as a value of kind `letter` while marking."""

    def apply(value: Any, *args: Any, **kwargs: Any) -> str:
        if not _marking.get():
            return function(value, *args, **kwargs)
        if isinstance(value, (list, tuple)):
            value = [unmarked(v) for v in value]
        text = function(unmarked(value), *args, **kwargs)
        return f"{OPEN}{letter}{text}{CLOSE}"

    apply.__name__ = apply.__qualname__ = f"{getattr(function, '__name__', 'filter')}_value"
    apply.__module__ = __name__
    return apply


def library(text: str) -> str:
    """Library code as `bash()` hands it to a template: marked while marking."""
    return f"{LIBRARY}{text}{END}" if _marking.get() else text


@dataclass(frozen=True)
class Part:
    """A script's text as one check sees it; `lines[i]` is the script's line of the text's line i + 1."""

    text: str
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    values: Part  # ends with a statement that reads every constant (see sentinel)
    shape: Part
    chunks: tuple[Part, ...]  # the values, cut; each ends reading the constants it assigns


def split(marked: str, rendered: str) -> Layout | None:
    """The layout of a script rendered as `rendered`, from its marked render; None where they disagree."""
    script: list[str] = []  # the script again, from the marked text: it must be `rendered`
    skeleton: list[str] = []  # the shape without its library code: where the constants are read from
    values, shape = _Builder(), _Builder()
    inside: set[int] = set()  # lines of the values part that begin within a value: no chunk starts there
    line, at, state, letter = 1, 0, "text", ""
    for mark in _MARK.finditer(marked):
        piece, kind = marked[at : mark.start()], mark.group()
        at = mark.end()
        if state == "text":
            values.add(piece, line)
            shape.add(piece, line)
            skeleton.append(piece)
            if kind == OPEN and marked[at : at + 1] in PLACEHOLDERS:
                state, letter = "value", marked[at]
                at += 1
            elif kind == LIBRARY:
                state = "library"
            else:
                return None
        elif state == "value" and kind == CLOSE:
            inside.update(range(values.line + 1, values.line + piece.count("\n") + 1))
            values.add(_fixed_digest(piece), line)
            shape.add(PLACEHOLDERS[letter], line)
            skeleton.append(PLACEHOLDERS[letter])
            state = "text"
        elif state == "library" and kind == END:
            shape.add(piece, line)
            state = "text"
        else:
            return None
        script.append(piece)
        line += piece.count("\n")
    if state != "text":
        return None
    tail = marked[at:]
    script.append(tail)
    if "".join(script) != rendered:
        return None
    values.add(tail, line)
    shape.add(tail, line)
    skeleton.append(tail)
    body, constants = values.part(), _constants("".join(skeleton))
    values.add("\n" + sentinel(constants) + "\n", line + tail.count("\n"))
    return Layout(values.part(), shape.part(), _chunks(body, inside, constants))


# Where a chunk may start: a top-level statement of the templates (an assignment, a declaration) or the
# comment above one, at the start of a line that is not inside a value and does not continue the one before.
_STATEMENT = re.compile(r"(?:readonly |declare |[A-Za-z_][A-Za-z0-9_]*=|# )")
CHUNK_LINES = 12  # the fewest lines of a chunk: fewer, smaller files cost more than they save


def _chunks(body: Part, inside: set[int], constants: list[tuple[str, bool]]) -> tuple[Part, ...]:
    """`body` cut before statements, each piece at least CHUNK_LINES long and ending with a statement that
    reads the constants it assigns (only those: a name read but assigned in another piece would look like a
    misspelling of one assigned here)."""
    rows = body.text.split("\n")
    starts = [0]
    for i in range(1, len(rows)):
        if (
            i - starts[-1] >= CHUNK_LINES
            and i + 1 not in inside
            and _STATEMENT.match(rows[i])
            and not rows[i - 1].endswith("\\")
            and not rows[i - 1].startswith("#")  # a comment (a shellcheck directive) stays with its statement
        ):
            starts.append(i)
    chunks = []
    for a, b in zip(starts, [*starts[1:], len(rows)], strict=True):
        text = "\n".join(rows[a:b])
        assigned = {m.group(2) for m in _ASSIGNMENT.finditer(text)}
        end = sentinel((name, array) for name, array in constants if name in assigned)
        chunks.append(Part(text + "\n" + end + "\n", (*body.lines[a:b], body.lines[b - 1])))
    return tuple(chunks)


def sentinel(constants: Iterable[tuple[str, bool]]) -> str:
    """A statement after the values that reads every constant the templates assign: none is reported
    unused without the library, a new one (a value that escaped its quotes) still is, and a value that
    ends the script early (an `exit` let in) leaves this statement unreachable, which is reported."""
    used = " ".join(f'"${{{name}[@]}}"' if array else f'"${name}"' for name, array in constants)
    return f": sparkc-values-end {used}".rstrip()


def _constants(text: str) -> list[tuple[str, bool]]:
    found: dict[str, bool] = {}
    for m in _ASSIGNMENT.finditer(text):
        flags, name, paren = m.groups()
        found[name] = found.get(name, False) or bool(paren) or bool(flags and set(flags) & {"a", "A"})
    return sorted(found.items())


class _Builder:
    """Text put together piece by piece; each piece is the script's text from a known line on, or a
    placeholder (one line) for some of it."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.lines: list[int] = [1]

    @property
    def line(self) -> int:
        """The line (1-based) of this text that the next piece begins on."""
        return len(self.lines)

    def add(self, piece: str, line: int) -> None:
        self.pieces.append(piece)
        self.lines.extend(line + n for n in range(1, piece.count("\n") + 1))

    def part(self) -> Part:
        return Part("".join(self.pieces), tuple(self.lines))
