"""What an engine release's argument parser accepts, read from flag_tables/ (written by
tools/engine_flag_table.py from the engine's own parser), and a walk over command words that says what
that parser would make of them: which words are flags, which are their values, and what it would refuse.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from compiler.resources import data_dir
from compiler.spec.typed import EngineKind

# argparse reads a word like these as a value, not as a flag, when no option of the parser looks like one.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class Takes(StrEnum):
    NO = "no"  # a switch
    YES = "yes"  # one word, or (nargs + or a number) several
    OPTIONAL = "optional"  # nargs ? or *: zero or more words


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]  # every spelling, the first as the engine's help lists it
    takes: Takes
    nargs: int | str | None  # argparse's: None one word, "?", "*", "+", or a number
    choices: tuple[str, ...] | None

    @property
    def name(self) -> str:
        """The full long name (`--tensor-parallel-size`, not `-tp`)."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


@dataclass(frozen=True)
class FlagTable:
    engine: EngineKind
    version: str
    abbreviations: bool  # argparse's allow_abbrev: a unique prefix of a long name is that option
    options: Mapping[str, Option]  # by every spelling

    def find(self, flag: str) -> tuple[Option | None, tuple[str, ...]]:
        """The option `flag` names (exactly, or as argparse's unique abbreviation) and, where it is no
        exact spelling, the long names it abbreviates (one: an abbreviation; several: ambiguous)."""
        if flag in self.options:
            return self.options[flag], ()
        if not (self.abbreviations and flag.startswith("--")):
            return None, ()
        longer = tuple(sorted(n for n in self.options if n.startswith(flag)))
        return (self.options[longer[0]] if len(longer) == 1 else None), longer

    @property
    def display(self) -> str:
        """The engine as its project spells it."""
        return {EngineKind.VLLM: "vLLM", EngineKind.SGLANG: "SGLang", EngineKind.TRTLLM: "TensorRT-LLM"}[self.engine]

    def suggest(self, flag: str) -> list[str]:
        # The one closest spelling: several close ones are mostly a flag and its `--no-` negation.
        return difflib.get_close_matches(flag, list(self.options), n=1, cutoff=0.6)

    def spellings(self, name: str) -> tuple[str, ...]:
        option = self.options.get(name)
        return option.names if option is not None else (name,)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _parse(data: Mapping[str, object]) -> FlagTable:
    options: dict[str, Option] = {}
    raw = data["options"]
    assert isinstance(raw, list)
    for o in raw:
        choices = o["choices"]
        option = Option(
            tuple(o["names"]), Takes(o["takes_value"]), o["nargs"], None if choices is None else tuple(choices)
        )
        options.update(dict.fromkeys(option.names, option))
    return FlagTable(EngineKind(str(data["engine"])), str(data["version"]), bool(data["abbreviations"]), options)


@cache
def tables(kind: EngineKind) -> tuple[FlagTable, ...]:
    """Every shipped table of the engine, oldest release first."""
    found = [
        _parse(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(data_dir("flag_tables").glob(f"{kind.value}-*.json"))
    ]
    return tuple(sorted(found, key=lambda t: version_key(t.version)))


def newest(kind: EngineKind) -> FlagTable:
    return tables(kind)[-1]


def table_for(kind: EngineKind, version: str | None) -> FlagTable:
    return choose(kind, version).table


@dataclass(frozen=True)
class Choice:
    """The table engine.args are compared with, and whether what it refuses is an error."""

    table: FlagTable
    release: str | None  # the image's engine release, where sparkc knows it

    @property
    def binding(self) -> bool:
        """The table is the release's own: what it refuses, the image's engine refuses. Not so for another
        release, even a patch of the same line (vLLM 0.11.2 takes 20 flags 0.11.0 does not)."""
        return self.table.version == self.release

    @property
    def nearest(self) -> str:
        """How the table stands to the image's release, where it is another release's."""
        if self.release is None:
            return "the newest it has"
        table, release = version_key(self.table.version), version_key(self.release)
        if table > release:
            return "the oldest it has"
        return "the nearest earlier release of its line" if table[:2] == release[:2] else "the nearest earlier one"


def choose(kind: EngineKind, release: str | None) -> Choice:
    """The table of the image's release; else the nearest one at or below it (within its minor line where
    there is one), the oldest for an older release, the newest for an unknown release."""
    known = tables(kind)
    if release is None:
        return Choice(known[-1], None)
    below = [t for t in known if version_key(t.version) <= version_key(release)]
    return Choice(below[-1] if below else known[0], release)


def releases_with(kind: EngineKind, flag: str) -> tuple[str, ...]:
    """The releases of the shipped tables whose parser takes `flag` as written."""
    return tuple(t.version for t in tables(kind) if flag in t.options)


def spellings(kind: EngineKind, fields: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """For flags by their long names -> a spec field: every spelling the newest release takes -> that field,
    and every other spelling -> the long name."""
    table = newest(kind)
    every: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for name, field in fields.items():
        for spelling in table.spellings(name):
            if spelling.startswith("--no-") and not name.startswith("--no-"):
                continue  # BooleanOptionalAction's negation means the opposite, not the same flag
            every[spelling] = field
            if spelling != name:
                aliases[spelling] = name
    return every, aliases


@dataclass(frozen=True)
class Word:
    """One word of a command as the engine's parser reads it."""

    index: int
    text: str
    option: Option | None = None  # for a flag: the option it names
    values: tuple[int, ...] = ()  # for a flag: the indexes of the words it takes as its value


@dataclass(frozen=True)
class Problem:
    index: int  # of the word it is about
    message: str
    severe: bool = True  # False: the engine would accept it, but it is fragile (an abbreviation)
    unknown: str = ""  # for a flag the table does not have: the flag as written


def is_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _NEGATIVE_NUMBER.match(word)


def read_words(
    table: FlagTable, words: tuple[str, ...], canonical: Callable[[str], str]
) -> tuple[list[Word], list[Problem]]:
    """`words` as the parser takes them: each flag with the words it consumes as values, and what the
    parser would refuse or only accept by chance. `canonical` spells a flag as the engine normalises it."""
    read: list[Word] = []
    problems: list[Problem] = []
    i = 0
    while i < len(words):
        word = words[i]
        if not is_flag(word):
            before = read[-1] if read else None
            problems.append(Problem(i, _stray(table, word, before)))
            read.append(Word(i, word))
            i += 1
            continue
        written, eq, _ = word.partition("=")
        option, longer = table.find(_base(canonical(written)))
        if option is None:
            problems.append(Problem(i, _unknown(table, written, longer), unknown=written))
            # Unknown: take a following plain word as its value, so that one typo is one problem.
            taken: tuple[int, ...] = (i + 1,) if not eq and i + 1 < len(words) and not is_flag(words[i + 1]) else ()
            read.append(Word(i, word, None, taken))
            i += 1 + len(taken)
            continue
        if longer:
            problems.append(
                Problem(
                    i,
                    f"{written} is an abbreviation of {longer[0]}: write {longer[0]} (an "
                    "abbreviation stops working when a release adds another flag that starts the same way)",
                    severe=False,
                )
            )
        taken, problem = _values(option, written, bool(eq), words, i)
        if problem is not None:
            problems.append(Problem(i, problem))
        choice = _choice(option, written, word.partition("=")[2] if eq else None, [words[j] for j in taken])
        if choice is not None:
            problems.append(Problem(i, choice))
        read.append(Word(i, word, option, taken))
        i += 1 + len(taken)
    return read, problems


def _base(flag: str) -> str:
    # vLLM reads `--compilation-config.level 3` as a key inside the JSON value of --compilation-config.
    if flag.startswith("--") and "." in flag:
        return flag.split(".", 1)[0]
    return flag


def _values(
    option: Option, written: str, inline: bool, words: tuple[str, ...], i: int
) -> tuple[tuple[int, ...], str | None]:
    """The indexes of the words the option takes after it, and what is wrong with its value."""
    following = []
    for j in range(i + 1, len(words)):
        if is_flag(words[j]):
            break
        following.append(j)
    nargs = option.nargs
    if option.takes is Takes.NO:
        return (), (f"{written} takes no value; write {written} alone" if inline else None)
    if inline:
        return (), None
    if nargs is None or nargs == "?":
        taken = tuple(following[:1])
    elif isinstance(nargs, int):
        taken = tuple(following[:nargs])
    else:  # "*", "+": every plain word up to the next flag
        taken = tuple(following)
    need = 1 if nargs in (None, "+") else (nargs if isinstance(nargs, int) else 0)
    if len(taken) < need:
        return taken, f"{written} needs a value after it (as `{written} VALUE` or `{written}=VALUE`)"
    return taken, None


def _choice(option: Option, written: str, inline: str | None, values: list[str]) -> str | None:
    if option.choices is None:
        return None
    given = [inline] if inline is not None else values
    wrong = [v for v in given if v not in option.choices and v.lower() not in {c.lower() for c in option.choices}]
    if not wrong:
        return None
    shown = ", ".join(option.choices[:12]) + (", ..." if len(option.choices) > 12 else "")
    close = difflib.get_close_matches(wrong[0], list(option.choices), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{written} {wrong[0]!r} is not one of its choices{hint}: {shown}"


def _unknown(table: FlagTable, written: str, longer: tuple[str, ...]) -> str:
    engine = f"{table.display} {table.version}"
    if len(longer) > 1:
        return f"{written} is ambiguous in {engine}: it could be {', '.join(longer[:5])}; write the full name"
    close = table.suggest(written)
    hint = f"; did you mean {close[0]}?" if close else "; see the engine's --help for its flags"
    return f"{written} is not a flag of {engine}{hint}"


def _stray(table: FlagTable, word: str, before: Word | None) -> str:
    if before is not None and before.option is not None and before.option.takes is Takes.NO:
        why = f"{before.text} takes no value"
    elif before is not None and before.option is not None:
        why = f"{before.text} takes {len(before.values) or 'no'} word(s)"
    else:
        why = "no flag before it takes a value"
    return (
        f"{word!r} would be left over ({why}): {table.display} stops with 'unrecognized arguments'; "
        "remove it, or put the flag it belongs to before it"
    )
