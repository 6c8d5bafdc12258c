"""Validate a spec against schemas/spec.schema.json; fill in the schema's defaults."""
from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from compiler.diagnostics import Diagnostic, error
from compiler.resources import data_dir


@cache
def load_schema(name: str = "spec.schema.json") -> dict[str, Any]:
    return json.loads((data_dir("schemas") / name).read_text(encoding="utf-8"))


def validate(data: Any, schema: dict[str, Any]) -> list[Diagnostic]:
    validator = Draft202012Validator(schema)
    return [d for err in validator.iter_errors(data) for d in _explain(err)]


def _explain(err: ValidationError) -> Iterator[Diagnostic]:
    path = tuple(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        schema: Any = err.schema
        allowed = sorted(schema.get("properties", {}))
        for key in sorted(set(err.instance) - set(allowed)):
            hint = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            message = f"unknown key '{key}'"
            message += f"; did you mean '{hint[0]}'?" if hint else f"; allowed: {', '.join(allowed)}"
            yield Diagnostic(path + (key,), message, at_key=True)
        return
    custom = _custom_message(err)
    if err.validator in ("anyOf", "oneOf") and custom:
        yield error(path, f"{err.instance!r} {custom}")
        return
    if err.validator in ("anyOf", "oneOf") and err.context:
        best = best_match(err.context)
        others = len(err.context) - 1
        yield error(path, f"{_message(best)} ({others} other error{'s' if others != 1 else ''})")
        return
    yield error(path, _message(err))


def _custom_message(err: ValidationError) -> str | None:
    """The schema's own wording for a failed rule (`x-error`, beside the rule), if it has one."""
    schema: Any = err.schema
    return schema.get("x-error") if isinstance(schema, dict) else None


def _message(err: ValidationError) -> str:
    custom = _custom_message(err)
    if err.validator == "pattern" and custom:
        return f"{err.instance!r} {custom}"
    if err.validator == "propertyNames" and custom is None:
        return err.message
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return f"missing required key '{missing}'"
    if err.validator == "enum":
        values = list(err.validator_value)  # type: ignore[arg-type]
        choices = ", ".join(repr(c) for c in values)
        hint = difflib.get_close_matches(str(err.instance), [str(c) for c in values], n=1)
        return f"{err.instance!r} is not one of {choices}" + (f"; did you mean {hint[0]!r}?" if hint else "")
    if err.validator == "type":
        return f"{err.instance!r} is not of type {_types(err.validator_value)}"
    if err.validator == "const":
        return f"must be {err.validator_value!r}, found {err.instance!r}"
    return err.message


def _types(value: Any) -> str:
    names = value if isinstance(value, list) else [value]
    return " or ".join(f"'{n}'" for n in names)


def with_defaults(data: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a *valid* spec with every `default` of the schema filled in where the key is absent."""
    result = copy.deepcopy(data)
    _fill(result, schema, schema)
    return result


def _fill(value: Any, sub: dict[str, Any], root: dict[str, Any]) -> None:
    sub = _deref(sub, root)
    if isinstance(value, dict):
        for key, prop in sub.get("properties", {}).items():
            prop = _deref(prop, root)
            if key not in value and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
            if key in value:
                _fill(value[key], prop, root)
    elif isinstance(value, list) and "items" in sub:
        for item in value:
            _fill(item, sub["items"], root)


def _deref(sub: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in sub:
        return sub
    target: Any = root
    for part in sub["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    merged = {**target, **{k: v for k, v in sub.items() if k != "$ref"}}
    return _deref(merged, root) if "$ref" in target else merged
