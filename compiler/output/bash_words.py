"""How a value becomes bash text: quoted words, arrays one word or one group per line, comments that stay
comments. Every value of a spec reaches a generated script through these."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Words bash reads as one literal without quotes. Not the comma (shlex's safe set has it): in an array
# shellcheck reads a bare comma as a mistake (SC2054).
_BARE = re.compile(r"[A-Za-z0-9_@%+=:./-]+")
# Written outside the single quotes, each after a backslash: a quote cannot stand inside them, and
# shellcheck reads $ and ` in them as a forgotten expansion (SC2016), a backslash before the closing
# quote as an attempt to escape it (SC1003).
_SPECIAL = re.compile(r"([\\$`'])")


# A word with `=` that shellcheck reads as the data it is, bare: `NAME=value`, `--flag=value`.
_PLAIN_EQUALS = re.compile(r"[A-Za-z_-][^+@]*")


def quote(value: Any) -> str:
    """The one way a value enters a script: shell-quoted, so it is always data, never code.
    Booleans become 1 and 0, what the scripts test with (( )).

    Only single quotes and backslash-escaped ASCII outside them, never double quotes: under GBK, Big5
    or Shift_JIS a byte 0x5C (backslash) can be the second half of a character, so a "...\\$..." that
    is right in UTF-8 lets `$` loose in the caller's locale. Here a backslash never follows a byte of
    the value, and ' (0x27) is never part of a character in those encodings, so every locale reads
    the same words."""
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    if text.startswith("~"):
        # '~/x' is right, but shellcheck reads it as a tilde meant to expand (SC2088).
        return "\\~" + quote(text[1:]) if len(text) > 1 else "\\~"
    if _BARE.fullmatch(text) and ("=" not in text or _PLAIN_EQUALS.fullmatch(text)):
        # Bare, a word whose `=` follows only digits, or `+`/`@` (where shellcheck starts a new piece of the
        # word), is read as a mistaken assignment: SC2191 in an array, SC1097 after `NAME=`.
        return text
    parts = (part for part in _SPECIAL.split(text) if part)
    return "".join("\\" + part if _SPECIAL.fullmatch(part) else f"'{part}'" for part in parts) or "''"


def words(values: Iterable[Any], indent: int = 2) -> str:
    """A bash array's body: `()` when empty, else one quoted word per line."""
    items = [quote(v) for v in values]
    if not items:
        return "()"
    return "(\n" + "\n".join(" " * indent + w for w in items) + f"\n{' ' * max(indent - 2, 0)})"


def inline(values: Iterable[Any]) -> str:
    """A bash array on one line: `(a b c)`, each word quoted."""
    return "(" + " ".join(quote(v) for v in values) + ")"


def lines(command: Iterable[Iterable[Any]], indent: int = 2) -> str:
    """A command's groups of words, one group per line, each word quoted: the body of a bash array."""
    return "\n".join(" " * indent + " ".join(quote(w) for w in group) for group in command)


@dataclass(frozen=True)
class SplitRuns:
    """The nodes' `docker run` commands as the launch script writes them: the option groups every node's has
    (in the head's order), then each node's own groups, its entrypoint, image and command (by rank)."""

    shared: tuple[tuple[str, ...], ...]
    own: tuple[tuple[tuple[str, ...], ...], ...]
    spans: tuple[str, ...]  # where each node's own words lie among all nodes' own words: `START COUNT`
    # Each node's groups as the launcher joins them (shared, then own), by their index in the node's command.
    order: tuple[tuple[int, ...], ...]

    def position(self, node: int, group: int, word: int) -> int:
        """Where word `word` of group `group` of node `node`'s command lies in the words the launcher runs."""
        groups = [*self.shared, *self.own[node]]
        at = self.order[node].index(group)
        return sum(len(g) for g in groups[:at]) + word


def split_runs(commands: Iterable[Iterable[Iterable[str]]], image: str) -> SplitRuns:
    """`commands` (one per node, by rank, groups of words) split into what all share and what each adds.
    An option group is shared when every node's command has it before the image; docker reads its options
    in any order (none is given twice), so the words run are the same, in a reviewable order."""
    runs = [[tuple(group) for group in command] for command in commands]
    options = [run[: run.index((image,))] for run in runs]
    # A group given twice on some node (docker takes a repeated -e or -v) stays each node's own, so every
    # shared group has one place in every command.
    counts = [Counter(opts) for opts in options]
    common = {group for group in counts[0] if all(c[group] == 1 for c in counts)}
    shared = tuple(group for group in options[0] if group in common)
    # Only options are shared: a group after the image (the engine's own words) stays the node's even
    # when it equals one of them.
    mine = [
        [i for i, group in enumerate(run) if i >= len(opts) or group not in common]
        for run, opts in zip(runs, options, strict=True)
    ]
    own = tuple(tuple(run[i] for i in kept) for run, kept in zip(runs, mine, strict=True))
    order = tuple(
        tuple(opts.index(group) for group in shared) + tuple(kept) for opts, kept in zip(options, mine, strict=True)
    )
    spans, start = [], 0
    for groups in own:  # one after another, by rank, as bash's `${array[@]:START:COUNT}` takes them
        count = sum(len(group) for group in groups)
        spans.append(f"{start} {count}")
        start += count
    return SplitRuns(shared, own, tuple(spans), order)


def comment(value: Any) -> str:
    """A value shown in a `#` comment: anything that could end the comment line (a line break of any
    kind, any control character) becomes `?`, so the value stays inside the comment."""
    return "".join("?" if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in str(value))
