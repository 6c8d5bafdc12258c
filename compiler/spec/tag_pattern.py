"""An image profile's `engine_version.from_tag`: a regular expression an operator's file gives, matched
against an image's tag at every compile. Python's `re` has no time limit and backtracks, so `(a+)+b`
on a tag of 30 letters takes minutes: the language a pattern may use is cut down until every match is
quick on a tag of at most MAX_TAG characters (docker's own limit on a tag):

- a quantifier that may repeat more than once (`*`, `+`, `{2,}`) repeats one character or class only
  (`\\d+`, `[0-9.]*`, `.*`), never a group; `?` may follow a group (`(?:-.*)?`);
- at most MAX_REPEATS such quantifiers in all;
- no back-reference, look-around or conditional group;
- exactly one capturing group: the engine's version.
"""

from __future__ import annotations

import re
from re import _parser as sre_parse  # type: ignore[attr-defined]  # the parse tree `re` compiles from
from typing import Any

MAX_PATTERN = 200
MAX_TAG = 128
MAX_REPEATS = 4
_ONE_CHARACTER = {"LITERAL", "NOT_LITERAL", "IN", "ANY"}
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_REFUSED = {
    "GROUPREF": "a back-reference",
    "GROUPREF_EXISTS": "a conditional group",
    "ASSERT": "a look-ahead or look-behind",
    "ASSERT_NOT": "a negative look-ahead or look-behind",
}
EXAMPLE = r"v(\d+\.\d+\.\d+)(?:-.*)?"


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a from_tag (with what to write instead), or None."""
    if len(pattern) > MAX_PATTERN:
        return f"a pattern of {len(pattern)} characters; a tag's version needs a short one ({EXAMPLE})"
    try:
        compiled = re.compile(pattern)
        tree = sre_parse.parse(pattern)
    except re.error as exc:
        return f"not a regular expression: {exc.msg} at character {(exc.pos or 0) + 1}"
    if compiled.groups != 1:
        return (
            f"{compiled.groups} capturing groups; write exactly one, around the version, and (?:...) for any "
            f"other group: for example {EXAMPLE}"
        )
    problem, repeats = _walk(tree)
    if problem is None and repeats > MAX_REPEATS:
        problem = f"{repeats} repeating quantifiers; at most {MAX_REPEATS} keep a match quick"
    return None if problem is None else f"{problem}; for example {EXAMPLE}"


def _walk(items: Any) -> tuple[str | None, int]:
    """The first construct a from_tag may not use, and the count of repeating quantifiers."""
    repeats = 0
    for op, arg in items:
        name = str(op)
        if name in _REFUSED:
            return f"{_REFUSED[name]} makes matching slow; write the pattern without it", repeats
        if name in _REPEATS and arg[1] > 1:
            repeats += 1
            body = arg[2]
            if len(body) != 1 or str(body[0][0]) not in _ONE_CHARACTER:
                return _GROUP_REPEATED, repeats
        for child in _children(name, arg):
            problem, more = _walk(child)
            repeats += more
            if problem is not None:
                return problem, repeats
    return None, repeats


_GROUP_REPEATED = "a group repeated by *, + or {n,m} can make matching take minutes; repeat one character or class only"


def _children(name: str, arg: Any) -> list[Any]:
    """The parts of one parsed item that hold items of their own."""
    if name in _REPEATS:
        return [arg[2]]
    if name == "SUBPATTERN":
        return [arg[-1]]
    if name == "ATOMIC_GROUP":
        return [arg]
    return list(arg[1]) if name == "BRANCH" else []


def version_in(pattern: str, tag: str) -> str | None:
    """The version `pattern` (checked by pattern_problem) finds in `tag`, or None."""
    if len(tag) > MAX_TAG:
        return None
    match = re.fullmatch(pattern, tag)
    return match.group(1) if match else None
