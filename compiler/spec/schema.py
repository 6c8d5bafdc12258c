"""Validate a spec against schemas/spec.schema.json; fill in the schema's defaults."""

from __future__ import annotations

import copy
import datetime
import difflib
import json
import math
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from compiler.diagnostics import Diagnostic, error, show_key
from compiler.resources import data_dir
from compiler.spec.load import load_text

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


@cache
def load_schema(name: str = "spec.schema.json") -> dict[str, Any]:
    """The schema specs are validated with. A spec's `cluster: {file: PATH}` is replaced by the file's
    section before validation (compiler.spec.include), so here cluster is that section alone."""
    schema = editor_schema(name)
    if name == "spec.schema.json":
        schema = {**schema, "properties": {**schema["properties"], "cluster": schema["$defs"]["cluster"]}}
    return schema


def editor_schema(name: str = "spec.schema.json") -> dict[str, Any]:
    """The schema file as written, for editors and `sparkc schema`: cluster may also be {file: PATH}."""
    schema: dict[str, Any] = json.loads((data_dir("schemas") / name).read_text(encoding="utf-8"))
    return schema


def is_integer(value: Any) -> bool:
    """sparkc's integer, what YAML calls one: jsonschema's own "integer" takes 8000.0, which would reach a
    script as "8000.0"."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """sparkc's number, a finite one: .nan and .inf compare false with every bound, so minimum and maximum
    would pass them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


@cache
def _validator_class() -> Any:
    """Draft 2020-12 with sparkc's integer and number: the one rule that refuses whole-valued floats and
    non-finite numbers wherever the schema declares an integer or a number."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": lambda _, value: is_integer(value), "number": lambda _, value: is_number(value)}
    )
    return extend(Draft202012Validator, type_checker=checker)


def validate(data: Any, schema: dict[str, Any]) -> list[Diagnostic]:
    errors = list(_validator_class()(schema).iter_errors(data))
    # A value of the wrong type is one problem: `timeout: 10.0` is not also "less than the minimum of 120".
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    errors = [e for e in errors if e.validator == "type" or tuple(e.absolute_path) not in mistyped]
    return [d for err in errors for d in _explain(err)]


def _explain(err: ValidationError) -> Iterator[Diagnostic]:
    path = tuple(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        schema: Any = err.schema
        allowed = sorted(schema.get("properties", {}))
        for key in sorted(set(err.instance) - set(allowed)):
            hint = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            message = f"unknown key {show_key(key, always=True)}"
            message += f"; did you mean '{hint[0]}'?" if hint else f"; allowed: {', '.join(allowed)}"
            yield Diagnostic((*path, key), message, at_key=True)
        return
    custom = _custom_message(err)
    if err.validator in ("anyOf", "oneOf"):
        wanted = [t for e in err.context or [] if e.validator == "type" for t in _type_names(e.validator_value)]
        number = _number_message(err.instance, wanted)
        if number or custom:
            yield error(path, number or f"{_show(err.instance)} {custom}")
            return
    if err.validator in ("anyOf", "oneOf") and err.context:
        from jsonschema.exceptions import best_match

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
        return _pattern_message(err, custom)
    if err.validator == "propertyNames" and custom is None:
        return str(err.message)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return f"missing required key '{missing}'" + (f": {custom}" if custom else "")
    if err.validator == "enum":
        values = list(err.validator_value)
        choices = ", ".join(repr(c) for c in values)
        hint = difflib.get_close_matches(str(err.instance), [str(c) for c in values], n=1)
        return f"{_show(err.instance)} is not one of {choices}" + (f"; did you mean {hint[0]!r}?" if hint else "")
    if err.validator == "type":
        names = _type_names(err.validator_value)
        if isinstance(err.instance, datetime.date) and "string" in names:
            return f"{_show(err.instance)} is read as a date; in quotes ('{_show(err.instance)}') it is text"
        return _number_message(err.instance, names) or _type_message(err.instance, names)
    if err.validator in ("minItems", "minLength"):
        least = err.validator_value
        if err.validator == "minLength":
            return "must not be empty" if least == 1 else f"must be at least {least} characters"
        return "must list at least one" if least == 1 else f"must list at least {least}"
    if err.validator == "const":
        return f"must be {err.validator_value!r}, found {_show(err.instance)}"
    return str(err.message)


def _pattern_message(err: ValidationError, custom: str) -> str:
    schema: Any = err.schema
    if isinstance(err.instance, str) and schema.get("x-path"):
        return _path_message(err.instance, custom, home=schema.get("x-path") == "home")
    return f"{_show(err.instance)} {custom}"


def _path_message(value: str, custom: str, home: bool = False) -> str:
    """Why a path is refused: '~' (never expanded, or `home`: only as ~/), ':' or ',' (docker's mount syntax),
    or not absolute."""
    if home and value.startswith("~") and not value.startswith("~/"):
        user, _, rest = value[1:].partition("/")
        if not user:
            return f"{_show(value)} is the whole home of the ssh user: name a folder inside it, such as ~/models"
        return (
            f"{_show(value)}: only ~/ is read, as the home of the ssh user on each node; for {user}'s own folder "
            f"write its absolute path, such as /home/{user}/{rest or 'FOLDER'}".rstrip("/")
        )
    if value.startswith("~") and not home:
        user, _, rest = value[1:].partition("/")
        example = f"/home/{user or 'USER'}/{rest}".rstrip("/")
        return (
            f"{_show(value)}: '~' is not expanded (the path is used on other machines, maybe by another user); "
            f"write the absolute path, such as {example}"
        )
    bad = sorted({c for c in value if c in ":,"})
    if value.startswith(("/", "~/")) and bad:
        shown = " or ".join(f"'{c}'" for c in bad)
        return (
            f"{_show(value)} must not contain {shown}: docker's mount syntax uses them as separators; "
            "rename or link the folder"
        )
    if value.startswith(("/", "~/")):
        return f"{_show(value)} must not contain control characters; write the path without them"
    return f"{_show(value)} {custom}"


_TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true/false",
    "object": "a mapping (key: value)",
    "array": "a list",
    "null": "null",
}


def _type_message(instance: Any, names: list[str]) -> str:
    """`must be a whole number, found text '8000'; write it without quotes`: JSON Schema's types in YAML's words."""
    words = [_TYPE_WORDS.get(n, n) for n in names]
    wanted = (
        "true or false" if words == ["true/false"] else ", ".join(words[:-1]) + " or " * (len(words) > 1) + words[-1]
    )
    message = f"must be {wanted}, found {_found(instance)}"
    if isinstance(instance, str):
        unquoted = to_plain_scalar(instance)
        if any(_is_type(unquoted, n) for n in names if n != "string"):
            message += "; write it without quotes"
        elif "boolean" in names and instance.lower() in ("yes", "no", "on", "off", "y", "n"):
            message += "; write true or false"
    return message


def _is_type(value: Any, name: str) -> bool:
    if name == "boolean":
        return isinstance(value, bool)
    return (name == "integer" and is_integer(value)) or (name == "number" and is_number(value))


def to_plain_scalar(text: str) -> Any:
    """What YAML reads `text` as when it is written without quotes (text stays text)."""
    document, found = load_text(f"v: {text}", "value")
    return document.data["v"] if not found and isinstance(document.data, dict) else text


def _found(value: Any) -> str:
    if isinstance(value, str):
        return f"text {value!r}"
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return _show(value)
    if isinstance(value, (int, float)):
        return f"the number {_show(value)}"
    return _show(value)


def _type_names(value: Any) -> list[str]:
    return [str(n) for n in (value if isinstance(value, list) else [value])]


def _number_message(instance: Any, wanted: list[str]) -> str | None:
    """What is wrong with a float where the schema wants a whole number, or a finite one."""
    if not isinstance(instance, float) or not {"integer", "number"} & set(wanted):
        return None
    if not math.isfinite(instance):
        quote = f"; in quotes ('{_show(instance)}') it is text" if "string" in wanted else ""
        return f"{_show(instance)} is not a finite number{quote}"
    if "integer" in wanted and "number" not in wanted:
        return f"{_show(instance)} is not a whole number" + (f"; write {instance:.0f}" if instance.is_integer() else "")
    return None


def _show(value: Any) -> str:
    """A value as the spec's YAML spells it (true, null, .inf, 2024-01-01), strings quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, datetime.date):  # a datetime too
        return value.isoformat()
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


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


def field_schema(schema: dict[str, Any], path: tuple[str | int, ...]) -> dict[str, Any] | None:
    """The subschema that governs the value at `path`, or None where the schema does not say."""
    sub: Any = schema
    for part in path:
        sub = _deref(sub, schema)
        if isinstance(part, int):
            sub = sub.get("items")
        else:
            sub = sub.get("properties", {}).get(part, sub.get("additionalProperties"))
        if not isinstance(sub, dict):
            return None
    return _deref(sub, schema)


def other_values(sub: dict[str, Any]) -> list[Any]:
    """Valid values other than the field's default, where they are plain to pick (booleans, choices, integers)."""
    default = sub.get("default")
    if sub.get("type") == "boolean":
        return [not default] if isinstance(default, bool) else [True, False]
    if "enum" in sub:
        return [v for v in sub["enum"] if v != default]
    if sub.get("type") == "integer":
        high = sub.get("maximum")
        if not isinstance(default, int):
            low = sub.get("minimum", 0)
            return [low, low + 1]  # one of them differs from whatever default the compiler picks
        return [default + 1 if high is None or default < high else default - 1]
    return []
