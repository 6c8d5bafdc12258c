"""The user's engine.args against the flags sparkc sets: a repeat that agrees with the plan is kept,
one that would change it is refused (it would come last, win, and make the manifest describe another
deployment). Every spelling the engine's parser takes counts: `--max_model_len`, `-tp=2`, an
argparse abbreviation such as `--max-model`: the engine's flag table (compiler/engines/flag_table.py) says.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.engines.flag_table import Problem, Word, read_words
from compiler.resolve.context import Deployment


@dataclass(frozen=True)
class Repeat:
    index: int  # of the flag's word in engine.args
    written: str  # as the user wrote the flag
    flag: str  # as sparkc writes it
    value: str | None  # what the user gave it; None for a flag without a value
    planned: str | None  # what the plan gives it on every node; None where it differs per node or is unset

    @property
    def agrees(self) -> bool:
        return self.planned is not None and _same(self.value or "", self.planned)


def repeats(d: Deployment) -> list[Repeat]:
    """Every word of engine.args that names a flag sparkc sets, with what the plan gives that flag. The
    engine's flag table decides what names a flag (its aliases, an argparse abbreviation) and which words
    are its value."""
    args = d.spec.engine.args
    planned = planned_flags(d)
    names = _managed_names(d)
    found = []
    for word in read_args(d)[0]:
        if word.option is None:
            continue
        flag = names.get(word.option.name)
        if flag is None:
            continue
        written, eq, inline = word.text.partition("=")
        value: str | None = inline if eq else (args[word.values[0]] if word.values else None)
        if written.startswith("--no-") and not flag.startswith("--no-"):
            value = "false"  # BooleanOptionalAction's negation: the opposite of what sparkc passes
        found.append(Repeat(word.index, written, flag, value, planned.get(flag)))
    return found


def read_args(d: Deployment) -> tuple[list[Word], list[Problem]]:
    """engine.args as the image's engine release would parse them."""
    return read_words(d.flag_table, d.spec.engine.args, d.engine.canonical)


def planned_flags(d: Deployment) -> dict[str, str]:
    """Flag -> the value sparkc gives it on every node ("" for a flag without a value)."""
    per_rank = []
    for rank in range(len(d.nodes)):
        flags = {group[0]: (group[1] if len(group) > 1 else "") for group in d.engine.argv(d, rank).flags}
        per_rank.append({**d.engine.implied_flags(d), **flags})
    first = per_rank[0]
    return {flag: value for flag, value in first.items() if all(r.get(flag) == value for r in per_rank)}


def managed_fields(d: Deployment) -> dict[str, str]:
    """Every spelling of every flag sparkc sets in this deployment -> the spec field that controls it."""
    given = {field for field in set(d.engine.field_flags.values()) if _field_given(d, field)}
    return {**d.engine.managed_flags, **{f: field for f, field in d.engine.field_flags.items() if field in given}}


def _field_given(d: Deployment, field: str) -> bool:
    value: object = d.spec
    for part in field.split("."):
        value = getattr(value, part, None)
    return value is not None


def _managed_names(d: Deployment) -> dict[str, str]:
    """The long name of each option sparkc sets (as the flag table spells it) -> the spelling sparkc writes."""
    managed = managed_fields(d)
    wanted = set(managed) | {alias for alias, target in d.engine.aliases.items() if target in managed}
    names = {}
    for spelling in wanted:
        option, _ = d.flag_table.find(spelling)
        if option is not None:
            names[option.name] = d.engine.aliases.get(spelling, spelling)
    return names


def _same(given: str, planned: str) -> bool:
    if given == planned:
        return True
    try:
        return float(given) == float(planned)
    except ValueError:
        return False


def api_key_given(d: Deployment) -> tuple[int, str] | None:
    """Where `--api-key` stands in engine.args and the key it gives (both engines guard /v1 with it)."""
    args = d.spec.engine.args
    for i, word in enumerate(args):
        written, eq, inline = word.partition("=")
        if d.engine.canonical(written) == "--api-key":
            return i, inline if eq else (args[i + 1] if i + 1 < len(args) else "")
    return None


def api_key_variable(d: Deployment) -> str | None:
    """The secret the engine reads its API key from, where the spec lists it."""
    name = d.engine.api_key_variable
    return name if name is not None and name in d.spec.container.secrets else None
