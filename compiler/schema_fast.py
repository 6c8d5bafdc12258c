"""A quick yes to "is this spec valid?", without importing jsonschema (a fifth of an edited compile's time).

It knows the keywords sparkc's schemas use, with jsonschema's Draft 2020-12 meaning and compiler.schema's
integer and number. Its answer is one-sided: `True` means jsonschema finds no error either; `False` means
"not sure", and compiler.schema then asks jsonschema, which also words the errors. So a keyword it does
not know, or a comparison it cannot settle, makes it say False, never True.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cache
from typing import Any

# Keywords that say nothing about validity.
_NOTES = frozenset(["$id", "$schema", "$defs", "title", "description", "default", "x-error", "x-path"])


# A keyword's check: (value, the keyword's rule, the schema holding it, the root schema) -> valid.
Rule = Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]


class _Unsure(Exception):
    """A keyword or value this checker leaves to jsonschema."""


def surely_valid(data: Any, schema: dict[str, Any]) -> bool:
    """True only where jsonschema (with compiler.schema's types) would report no error."""
    try:
        return _valid(data, schema, schema)
    except (_Unsure, RecursionError):
        return False


def is_integer(value: Any) -> bool:
    """What YAML calls an integer: jsonschema's own "integer" takes 8000.0, which reaches a script as "8000.0"."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite number: .nan and .inf compare false with every bound, so minimum and maximum would pass them."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "integer": is_integer,
    "number": is_number,
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _equal(value: Any, wanted: Any) -> bool:
    """Equal as jsonschema's enum and const compare (True is not 1); raises where unsure (lists, mappings)."""
    if isinstance(value, str) or isinstance(wanted, str):
        return bool(value == wanted)
    if isinstance(value, bool) or isinstance(wanted, bool):
        return value is wanted
    if value is None or wanted is None:
        return value is wanted
    if isinstance(value, (int, float)) and isinstance(wanted, (int, float)):
        return bool(value == wanted)
    raise _Unsure


def _unique(items: list[Any]) -> bool:
    if not all(isinstance(item, str) for item in items):
        raise _Unsure  # numbers, booleans and containers compare in ways left to jsonschema
    return len(set(items)) == len(items)


def _valid(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    if schema is True:
        return True
    if schema is False:
        return False
    if not isinstance(schema, dict):
        raise _Unsure
    for keyword, rule in schema.items():
        if keyword not in _NOTES and not _KEYWORDS.get(keyword, _unknown)(value, rule, schema, root):
            return False
    return True


def _unknown(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    raise _Unsure


def _ref(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(rule, str) or not rule.startswith("#/"):
        raise _Unsure
    target: Any = root
    for part in rule[2:].split("/"):
        if not isinstance(target, dict) or part not in target or "~" in part or "%" in part:
            raise _Unsure
        target = target[part]
    return _valid(value, target, root)


def _type(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    names = rule if isinstance(rule, list) else [rule]
    if any(name not in _TYPES for name in names):
        raise _Unsure
    return any(_TYPES[name](value) for name in names)


def _properties(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(value, dict):
        return True
    return all(_valid(value[key], sub, root) for key, sub in rule.items() if key in value)


def _pattern_properties(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(value, dict):
        return True
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Unsure
        if not all(_valid(item, sub, root) for pattern, sub in rule.items() if _regex(pattern).search(key)):
            return False
    return True


def _additional(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(value, dict):
        return True
    named = schema.get("properties", {})
    patterns = [_regex(p) for p in schema.get("patternProperties", {})]
    for key, item in value.items():
        if key in named:
            continue
        if patterns and not isinstance(key, str):
            raise _Unsure
        if any(p.search(key) for p in patterns):
            continue
        if not _valid(item, rule, root):
            return False
    return True


def _property_names(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    return not isinstance(value, dict) or all(_valid(key, rule, root) for key in value)


def _required(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    return not isinstance(value, dict) or all(key in value for key in rule)


def _items(value: Any, rule: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if "prefixItems" in schema:
        raise _Unsure
    return not isinstance(value, list) or all(_valid(item, rule, root) for item in value)


def _string(check: Callable[[Any, Any], bool]) -> Rule:
    return lambda value, rule, schema, root: not isinstance(value, str) or check(value, rule)


def _number(check: Callable[[Any, Any], bool]) -> Rule:
    return lambda value, rule, schema, root: not is_number(value) or check(value, rule)


def _array(check: Callable[[Any, Any], bool]) -> Rule:
    return lambda value, rule, schema, root: not isinstance(value, list) or check(value, rule)


_KEYWORDS: dict[str, Rule] = {
    "$ref": _ref,
    "type": _type,
    "properties": _properties,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional,
    "propertyNames": _property_names,
    "required": _required,
    "items": _items,
    "anyOf": lambda value, rule, schema, root: any(_valid(value, sub, root) for sub in rule),
    "enum": lambda value, rule, schema, root: any(_equal(value, each) for each in rule),
    "const": lambda value, rule, schema, root: _equal(value, rule),
    "pattern": _string(lambda value, rule: _regex(rule).search(value) is not None),
    "minLength": _string(lambda value, rule: len(value) >= rule),
    "maxLength": _string(lambda value, rule: len(value) <= rule),
    "minimum": _number(lambda value, rule: value >= rule),
    "maximum": _number(lambda value, rule: value <= rule),
    "exclusiveMinimum": _number(lambda value, rule: value > rule),
    "minItems": _array(lambda value, rule: len(value) >= rule),
    "uniqueItems": _array(lambda value, rule: not rule or _unique(value)),
}
