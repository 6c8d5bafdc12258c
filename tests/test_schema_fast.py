"""compiler.schema_fast says "valid" only where jsonschema agrees, and says it for the specs people write.

Its "valid" skips jsonschema altogether, so a wrong yes would let a bad spec reach the resolver: each
case below is checked by both, on the examples, the invalid examples and thousands of random edits.
"""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compiler.diagnostics import has_errors
from compiler.loader import load_text
from compiler.schema import _validator_class, load_schema
from compiler.schema_fast import surely_valid
from tests.fuzzing import edit, edited_examples, examples, valid_leaning_examples
from tests.specs import EXAMPLES, example

SPEC = load_schema()
PROFILE = load_schema("profile.schema.json")


def jsonschema_valid(data: Any, schema: dict[str, Any]) -> bool:
    return not any(True for _ in _validator_class()(schema).iter_errors(data))


def agree(data: Any, schema: dict[str, Any] = SPEC) -> bool:
    """Both answers for `data`; fails at once if the quick check said valid and jsonschema does not."""
    quick, full = surely_valid(data, schema), jsonschema_valid(data, schema)
    assert not quick or full, f"the quick check let through what jsonschema refuses: {json.dumps(data, default=str)}"
    return quick == full


def loaded(path: Path) -> Any:
    document, problems = load_text(path.read_text(encoding="utf-8"), str(path))
    assert not [p for p in problems if p.severity.name == "ERROR"], path
    return document.data


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_is_valid_at_a_glance(path: Path) -> None:
    data = example(path.stem)
    if isinstance(data.get("cluster"), dict) and "file" in data["cluster"]:
        pytest.skip("its cluster section is in another file")
    assert surely_valid(data, SPEC)
    assert surely_valid(loaded(path), SPEC)  # ruamel's own types (CommentedMap, ScalarFloat) too


def yaml_documents(paths: list[Path]) -> list[Path]:
    """Those of `paths` that load as YAML (the rest are invalid examples of YAML itself)."""
    return [p for p in paths if not has_errors(load_text(p.read_text(encoding="utf-8"), str(p))[1])]


@pytest.mark.parametrize("path", yaml_documents(sorted((EXAMPLES / "invalid").glob("*.yaml"))), ids=lambda p: p.stem)
def test_no_invalid_example_is_valid_at_a_glance(path: Path) -> None:
    assert agree(loaded(path))


@given(edited_examples())
@examples(1500)
def test_random_edits_get_the_same_answer(case: tuple[str, list[str], dict[str, Any]]) -> None:
    agree(case[2])  # a "not sure" on an invalid spec is fine; a yes where jsonschema says no is not


@given(valid_leaning_examples())
@examples(500)
def test_edits_the_schema_takes_are_valid_at_a_glance(case: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
    assert agree(case[2]), case[1]


# Each value is tried at every place of the seed example that holds a scalar.
AWKWARD = [
    True, False, 1, 0, 1.0, 0.0, -1, 2**64, float("nan"), float("inf"), None, "", "1", "true", "x" * 300,
    "/abs/path", "~/models", "a:b", "null", [], {}, ["a", "a"], ["a", "b"], [1, 1], [True, 1],
    datetime.date(2024, 1, 1), {"a": 1},
]  # fmt: skip


def scalar_places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in scalar_places(item, (*path, key))]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in scalar_places(item, (*path, i))] + [path]
    return [path]


def test_awkward_values_everywhere_get_the_same_answer() -> None:
    seed = example("seed-qwen35-122b-2spark-ray")
    disagreements = 0
    for place in scalar_places(seed):
        for value in AWKWARD:
            data = copy.deepcopy(seed)
            node = data
            for part in place[:-1]:
                node = node[part]
            node[place[-1]] = copy.deepcopy(value)
            disagreements += not agree(data)
    assert disagreements == 0  # where it is unsure (lists of numbers), the spec is also invalid


def test_a_keyword_it_does_not_know_is_left_to_jsonschema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}
    assert not surely_valid({"n": 4}, schema)  # not sure: jsonschema decides
    assert surely_valid({"m": 3}, {"type": "object", "properties": {"n": {"type": "integer"}}})


def test_true_is_not_one_and_nan_is_no_number() -> None:
    assert not surely_valid(True, {"enum": [1, 2]})
    assert not surely_valid(1, {"const": True})
    assert surely_valid(1.0, {"enum": [1]}) and jsonschema_valid(1.0, {"enum": [1]})
    assert not surely_valid(float("nan"), {"type": "number", "maximum": 3})
    assert not surely_valid(8000.0, {"type": "integer"})


PROFILES = sorted((EXAMPLES.parent / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_profile_is_valid_at_a_glance(path: Path) -> None:
    assert surely_valid(loaded(path), PROFILE)


@given(st.data())
@examples(300)
def test_edited_profiles_get_the_same_answer(data: st.DataObject) -> None:
    profile = copy.deepcopy(loaded(data.draw(st.sampled_from(PROFILES))))
    for _ in range(data.draw(st.integers(1, 3))):
        data.draw(edit(profile))
    agree(profile, PROFILE)
