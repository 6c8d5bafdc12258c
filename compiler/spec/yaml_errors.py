"""ruamel's scanner, parser and composer errors told in plain words, with what to write instead.

ruamel words its errors for YAML implementers ("expected <block end>, but found '<block mapping start>'");
a person writing a spec needs to hear which line is off and how to fix it. Unknown wordings fall back to
ruamel's text with its token names spelled out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ruamel.yaml.error import MarkedYAMLError

_TOKENS = {
    "<block end>": "the end of the block",
    "<block mapping start>": "a new key",
    "<block sequence start>": "a list",
    "'?'": "a key",
    "'-'": "a list item ('- ')",
}


def plain_message(exc: MarkedYAMLError, text: str) -> tuple[str, int, int]:
    """(message, line, column), 1-based, for a YAML error ruamel raised while reading `text`."""
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    context, problem = str(exc.context or ""), str(exc.problem or "")
    opened = exc.context_mark.line + 1 if exc.context_mark else line
    return f"YAML syntax error: {_translate(context, problem, text, line, col, opened)}", line, col


@dataclass(frozen=True)
class _Where:
    text: str
    line: int
    col: int
    opened: int  # line of what the error's context started (an open '{', a quote)


def _colon(m: re.Match[str], at: _Where) -> str:
    lines = at.text.splitlines()
    before = lines[at.line - 1][: at.col - 1] if at.line <= len(lines) else ""
    if ": " in before:
        return "the value contains ': '; put the value in quotes"
    return (
        "a ':' where no key can start; is this line indented like the key above it, or should the value be in quotes?"
    )


def _flow(m: re.Match[str], at: _Where) -> str:
    opening, closing = ("{", "}") if m.group(1) == "mapping" else ("[", "]")
    return f"a '{opening}' at line {at.opened} is not closed; end it with '{closing}' (items separated by ',')"


# (pattern on "context | problem", message): the first that matches wins.
_RULES: tuple[tuple[str, Callable[[re.Match[str], _Where], str]], ...] = (
    (r".* \| found character '\\t' that cannot start any token", lambda m, at: (
        f"YAML indents with spaces; replace the tab at line {at.line}")),
    (r".* \| found character '(.+)' that cannot start any token", lambda m, at: (
        f"'{m.group(1)}' cannot start a value; put the value in quotes")),
    (r".* \| mapping values are not allowed here", _colon),
    (r"while parsing a block mapping \| .*'<block mapping start>'", lambda m, at: (
        "this line is indented less than the keys above it but more than their parent; "
        "line up keys of one mapping in the same column")),
    (r"while parsing a block mapping \| .*'-'", lambda m, at: (
        "a list item ('- ') where a key was expected; indent it under its key")),
    (r"while parsing a block collection \| .*'\?'", lambda m, at: (
        "a key among list items; start it with '- ' or indent it less")),
    (r"while parsing a flow (mapping|sequence) \| .*", _flow),
    (r"while scanning a .*quoted scalar \| .*end of stream", lambda m, at: (
        f"a quoted text that starts at line {at.opened} is not closed; end it with the same quote")),
    (r".* \| found undefined alias '(.+)'", lambda m, at: (
        f"alias *{m.group(1)} names no anchor (&{m.group(1)}) defined above it")),
    (r".* \| found unknown escape character '(.+)'", lambda m, at: (
        f"unknown escape '\\{m.group(1)}' in double quotes; write '\\\\' for a backslash or use single quotes")),
    (r"expected a single document in the stream \| .*", lambda m, at: (
        "a second document ('---'); a spec is one document: remove the '---' line")),
)  # fmt: skip


def _translate(context: str, problem: str, text: str, line: int, col: int, opened: int) -> str:
    at = _Where(text, line, col, opened)
    for pattern, message in _RULES:
        found = re.fullmatch(pattern, f"{context} | {problem}", re.DOTALL)
        if found:
            return message(found, at)
    words = " ".join(p for p in (context, problem) if p) or "invalid YAML"
    for token, plain in _TOKENS.items():
        words = words.replace(token, plain)
    return words
