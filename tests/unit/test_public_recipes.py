"""Thirteen public recipes (tests/recipes/public/, each naming its source), end to end: `sparkc import`, then
the compile, then the compiled engine command compared flag by flag with the command the recipe's own
launcher runs. The real engine parsers read these commands too (tests/integration/test_engine_parsers.py). What sparkc
cannot carry is an error that says how; where the commands differ, REASONS says why sparkc's is right."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.engines.flag_table import newest, read_words
from compiler.pipeline import compile_text
from compiler.plan import flat
from compiler.resolve.context import derive
from compiler.spec.build import build_spec
from compiler.spec.schema import load_schema, with_defaults
from compiler.spec.typed import EngineKind
from compiler.tools.importer import import_recipe
from tests.specs import ROOT, diagnostics_text

PUBLIC = ROOT / "tests" / "recipes" / "public"

# Recipes sparkc refuses to import, and what the error says.
REFUSED = {
    "eugr-gemma4-26b-a4b-fp8-speculative.yaml": "names the draft google/gemma-4-26B-A4B-it-assistant by its",
    "eugr-nemotron-3-nano-nvfp4.yaml": "names nano_v3_reasoning_parser.py, which the mod mods/fix-nemotron-nano puts",
}
# Flags whose value sparkc writes differently, and why that is right.
REASONS = {
    "--model-path": "sparkc serves the weights mounted from the node, not the Hugging Face id (HF_HUB_OFFLINE=1)",
}


def _recipe_words(recipe: dict[str, Any]) -> list[str]:
    """The command the recipe's launcher runs: placeholders filled from defaults and the model, as sparkrun does."""
    values = {"model": recipe.get("model", ""), **recipe.get("defaults", {})}
    text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", lambda m: str(values[m.group(1)]), recipe["command"])
    words = shlex.split(text.replace("{{", "{").replace("}}", "}"))
    return words[3:]  # after `vllm serve MODEL` or `python3 -m sglang.launch_server`


def _options(kind: EngineKind, words: list[str]) -> dict[str, tuple[str, ...]]:
    engine_words = tuple(words)
    read, problems = read_words(newest(kind), engine_words, lambda flag: flag)
    assert [p for p in problems if p.severe] == [], problems
    found: dict[str, tuple[str, ...]] = {}
    for word in read:
        assert word.option is not None
        _, eq, inline = word.text.partition("=")
        found[word.option.name] = (inline,) if eq else tuple(engine_words[j] for j in word.values)
    return found


def test_the_public_recipes_are_here() -> None:
    assert len(list(PUBLIC.glob("*.yaml"))) == 13
    for path in PUBLIC.glob("*.yaml"):
        assert path.read_text(encoding="utf-8").startswith("# After "), f"{path.name} names no source"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_sparkc_cannot_carry_is_an_error_that_says_how(name: str) -> None:
    result = import_recipe((PUBLIC / name).read_text(encoding="utf-8"), name)
    assert any(REFUSED[name] in w.message for w in result.errors), [str(w) for w in result.warnings]


@pytest.mark.parametrize("name", sorted(p.name for p in PUBLIC.glob("*.yaml") if p.name not in REFUSED))
def test_the_compiled_command_is_the_recipes_own(name: str) -> None:
    text = (PUBLIC / name).read_text(encoding="utf-8")
    recipe = YAML(typ="safe").load(text)
    imported = import_recipe(text, name)
    assert imported.errors == ()
    # What the operator writes where import left a PLACEHOLDER (the nodes, their RDMA devices, the weights' path):
    # compile refuses those.
    spec_text = imported.spec_text.replace("- PLACEHOLDER\n", "- rocep1s0f1\n").replace("PLACEHOLDER", "filled-in")
    result = compile_text(spec_text, "spec.yaml", render_files=False)
    assert result.ok, diagnostics_text(result)
    given: Any = YAML(typ="safe").load(spec_text)
    d = derive(build_spec(with_defaults(given, load_schema()), given))
    kind = d.engine.kind
    # After `vllm serve MOUNT` or `python3 -m sglang.launch_server`: three words either way.
    compiled = _options(kind, list(flat(d.engine.argv(d, 0).command))[3:])
    wanted = _options(kind, _recipe_words(recipe))
    differs = {
        flag: (values, compiled.get(flag))
        for flag, values in wanted.items()
        if compiled.get(flag) != values and flag not in REASONS
    }
    assert differs == {}


def test_public_recipe_commands_parse_in_the_flag_table_without_a_stray_word(tmp_path: Path) -> None:
    """The importer left no word behind: every recipe flag reached the spec (a field or engine.args)."""
    for path in sorted(PUBLIC.glob("*.yaml")):
        imported = import_recipe(path.read_text(encoding="utf-8"), path.name)
        assert not any("left out" in w.message for w in imported.warnings), path.name
