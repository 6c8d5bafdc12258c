"""The user's engine.args against the flags sparkc sets: a repeat that agrees with the plan is kept,
one that would change it is refused (it would come last, win, and make the manifest describe another
deployment). Every spelling the engine's parser takes counts: `--max_model_len`, `-tp=2`, an
argparse abbreviation such as `--max-model`.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """Every word of engine.args that names a flag sparkc sets, with what the plan gives that flag."""
    engine, args = d.engine, d.spec.engine.args
    planned = planned_flags(d)
    found = []
    for i, word in enumerate(args):
        if not word.startswith("-"):
            continue
        written, eq, inline = word.partition("=")
        flag = _managed(d, engine.canonical(written))
        if flag is None:
            continue
        if eq:
            value: str | None = inline
        elif planned.get(flag) == "":  # sparkc passes it without a value
            value = None
        else:
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        found.append(Repeat(i, written, flag, value, planned.get(flag)))
    return found


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


def _managed(d: Deployment, flag: str) -> str | None:
    engine = d.engine
    managed = managed_fields(d)
    names = set(managed) | {alias for alias, target in engine.aliases.items() if target in managed}
    if flag not in names:
        # argparse takes a unique prefix of a long flag as the flag itself.
        longer = sorted(n for n in names if flag.startswith("--") and len(flag) > 3 and n.startswith(flag))
        if not longer:
            return None
        flag = longer[0]
    return engine.aliases.get(flag, flag)


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
