"""docs/spec-reference.md is what `python -m compiler.tools.spec_reference` prints from schemas/, so the page
cannot drift from the schema the compiler checks; and the generator shows every field with its facts."""

from __future__ import annotations

import json

from compiler.resources import data_dir
from compiler.tools.spec_reference import Schema, entry, reference
from tests.specs import ROOT

REGENERATE = "python -m compiler.tools.spec_reference > docs/spec-reference.md"


def test_the_committed_reference_is_what_the_generator_prints() -> None:
    committed = (ROOT / "docs" / "spec-reference.md").read_text(encoding="utf-8")
    assert committed == reference(), f"docs/spec-reference.md is stale: run {REGENERATE}"


def test_every_property_of_the_spec_schema_has_an_entry() -> None:
    schema = json.loads((data_dir("schemas") / "spec.schema.json").read_text(encoding="utf-8"))
    names: set[str] = set()

    def collect(node: object) -> None:
        if isinstance(node, dict):
            names.update(node.get("properties", {}))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(schema)
    headings = [line for line in reference().splitlines() if line.startswith("### `")]
    last_parts = {h.split("`")[1].rsplit(".", 1)[-1].removesuffix("[]") for h in headings}
    assert sorted(names - last_parts) == []


def test_an_entry_carries_type_default_allowed_values_and_description() -> None:
    schema = Schema(
        {
            "type": "object",
            "required": ["port"],
            "properties": {
                "port": {"$ref": "#/$defs/port", "description": "Where it listens."},
                "mode": {"enum": ["fast", "safe"], "default": "safe"},
                "nodes": {"type": "array", "items": {"type": "object", "properties": {"ip": {"type": "string"}}}},
            },
            "$defs": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
        }
    )
    fields = {f.path: f for f in schema.fields(schema.root, "")}
    assert list(fields) == ["port", "mode", "nodes", "nodes[].ip"]
    assert entry(fields["port"]) == (
        "### `port`\n\nType: integer. Required. Allowed: 1 to 65535.\n\nWhere it listens.\n"
    )
    assert entry(fields["mode"]) == "### `mode`\n\nType: string. Default: `safe`. Allowed: `fast`, `safe`.\n"
    assert fields["nodes"].type == "list of objects"
