"""The lint gate in two parts (compiler/layout.py): a script's values checked without the library code, and
its shape (every value a placeholder) checked once and remembered. Whatever the whole script's check would
refuse, the parts must refuse too, also when only the values part runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from compiler import layout, lint, render, shipped_shapes
from compiler.layout import CLOSE, OPEN, split
from compiler.lint import LintCache, lint_scripts
from compiler.pipeline import Beside, GeneratedScriptError, compile_text
from tests.specs import EXAMPLES, dump, example, with_changes

SEED = "seed-qwen35-122b-2spark-ray"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def module_cache(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A cache folder of this module (shapes checked once for all its tests), and Jinja's environment made
    anew (a test patches its filters)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache))
    render.environment.cache_clear()
    yield
    render.environment.cache_clear()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What shellcheck actually runs on: `name` for a whole script, `name (part)` for a part."""
    seen: list[str] = []
    check = lint._check

    def recording(
        files: dict[str, str], todo: list[str], checks: list[lint.Check], run: list[lint.Check], *tools: str
    ) -> list[str]:
        seen.extend(f"{c.name} ({c.folder})" if c.folder else c.name for c in run)
        return check(files, todo, checks, run, *tools)

    monkeypatch.setattr(lint, "_check", recording)
    return seen


def compiled(changes: dict[str, object] | None = None) -> dict[str, str]:
    result = compile_text(dump(with_changes(example(SEED), changes or {})), "spec.yaml")
    assert result.ok, result.diagnostics
    return result.files


def shellcheck_findings(error: GeneratedScriptError) -> list[str]:
    return [line for line in str(error).splitlines() if "bash -n" not in line and re.search(r"\[SC\d+\]", line)]


def test_an_edit_checks_the_values_and_remembers_the_shape(
    checked: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(shipped_shapes, "_listed", lambda: ("", frozenset()))  # as for a shape not shipped clean
    compiled()
    assert set(checked) == {f"{name} ({part})" for name in render.SCRIPTS for part in ("chunks", "shape")}
    first = checked.count("launch-cluster.sh (chunks)")
    checked.clear()
    compiled({"engine.max_model_len": 5000})
    # The chunks holding the context length (in each node's docker run and probe arrays); not those holding
    # the spec's digest, which the values hold as a fixed one; no shape, no values checked whole.
    assert set(checked) == {"launch-cluster.sh (chunks)"}
    assert 1 < checked.count("launch-cluster.sh (chunks)") < first / 2
    checked.clear()
    compiled({"engine.max_model_len": 5000})
    assert checked == []  # the same scripts: known clean whole


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_every_examples_values_are_found_clean_by_their_chunks(name: str, checked: list[str]) -> None:
    """A chunk that needs another (a name it reads, a statement cut in two) sends its values to a whole
    check: correct, but slow. The templates must cut cleanly for every example."""
    spec = example(name)
    spec["name"] = f"{spec['name']}-chunked"  # scripts the module's cache has not seen
    result = compile_text(dump(spec), "spec.yaml", beside=Beside(spec_dir=EXAMPLES))
    assert result.ok, result.diagnostics
    assert "(chunks)" in " ".join(checked) and not [c for c in checked if c.endswith("(values)")], checked


def test_no_chunk_begins_inside_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "CHUNK_LINES", 2)
    value = "'first line\n" + "readonly SMUGGLED=1\n" * 6 + "last line'"
    marked = "readonly A=1\nreadonly B=\x01q" + value + "\x02\n" + "readonly C=1\n" * 6
    found = split(marked, marked.replace("\x01q", "").replace("\x02", ""))
    assert found is not None and len(found.chunks) > 2
    for chunk in found.chunks:
        assert chunk.text.count("'") % 2 == 0, chunk.text  # each piece holds the value whole, or none of it
        end = chunk.text.rstrip("\n").rpartition("\n")[2]
        assert end.startswith(": sparkc-values-end") and "SMUGGLED" not in end  # only the templates' names


@pytest.mark.parametrize(
    ("field", "payload"),
    [
        ("model.name", "a'; exit 0; '"),
        ("container.env", "a'; exit 0; '"),
        ("container.env", "a'; EVIL=1; '"),
        ("engine.args", "x' ) ; exit ; ( '"),
        ("engine.args", "a' $(id) '"),
        ("model.name", "a'`id`'"),
        # code that reads, or undoes, a constant another piece of the values assigns
        ("engine.args", "a' $NODES '"),
        ("container.env", "a'; unset HEAD; '"),
    ],
)
@pytest.mark.parametrize("bug", ["single quotes", "no quotes", "double quotes"])
def test_a_value_that_escapes_broken_quoting_is_caught_by_the_values_part_alone(
    field: str, payload: str, bug: str, checked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    changes: dict[str, object] = {
        "model.name": {"model.name": payload},
        "container.env": {"container.env": {"GREETING": payload}},
        "engine.args": {"engine.args": [payload]},
    }[field]
    compiled(changes)  # quoted right: clean, and every shape remembered
    broken = {"single quotes": "'{}'", "no quotes": "{}", "double quotes": '"{}"'}[bug]
    monkeypatch.setattr(render, "quote", lambda value: broken.format(value))
    render.environment.cache_clear()
    checked.clear()
    with pytest.raises(GeneratedScriptError) as raised:
        compiled(changes)
    # The shapes were remembered; the chunks found something, so the values were checked whole.
    assert "launch-cluster.sh (values)" in checked or "stop-cluster.sh (values)" in checked, checked
    assert all(c.endswith(("(values)", "(chunks)")) for c in checked), checked
    found = shellcheck_findings(raised.value)
    assert found, str(raised.value)  # shellcheck itself, not only bash -n
    assert all(line.endswith("(the spec's values in place, library code left out)") for line in found)


def test_a_finding_of_the_values_names_the_scripts_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    changes: dict[str, object] = {"model.name": "a'; EVIL=1; '"}
    monkeypatch.setattr(render, "quote", lambda value: f"'{value}'")
    result = compile_text(dump(with_changes(example(SEED), changes)), "spec.yaml", lint=False)
    assert result.plan is not None
    files = render.render(result.plan)
    findings = lint_scripts(files, plan=result.plan)
    unused = [f for f in findings if "EVIL appears unused" in f]
    assert unused
    for finding in unused:
        name, line, _ = finding.split(":", 2)
        assert "EVIL=1" in files[name].splitlines()[int(line) - 1], finding


def library_changed(monkeypatch: pytest.MonkeyPatch, name: str, change: str, to: str) -> None:
    original = render.bash

    def changed(file: str) -> str:
        text = original(file)
        if file != name:
            return text
        assert change in text
        return text.replace(change, to)

    monkeypatch.setattr(render, "bash", changed)


@pytest.mark.parametrize(
    ("library", "change", "to", "finding"),
    [
        # the library reads a name no one assigns (SC2154)
        ("stop.sh", 'log "$DEPLOYMENT stopped on every node"', 'log "$DEPLOYMENT stopped $no_such_name"', "SC2154"),
        # the constants' kinds: an array read as a string (SC2128)
        ("stop.sh", 'log "$DEPLOYMENT stopped on every node"', 'log "$DEPLOYMENT stopped on $NODES"', "SC2128"),
        # a constant the templates assign that no code reads any more (SC2034)
        ("stop.sh", "$DEPLOYMENT", "deployment", "DEPLOYMENT appears unused"),
    ],
)
def test_the_shape_keeps_what_the_library_and_the_constants_say_of_each_other(
    library: str, change: str, to: str, finding: str, monkeypatch: pytest.MonkeyPatch, checked: list[str]
) -> None:
    compiled()  # the shapes as they are: remembered clean
    library_changed(monkeypatch, library, change, to)
    checked.clear()
    with pytest.raises(GeneratedScriptError) as raised:
        compiled({"name": "another-name"})
    assert "stop-cluster.sh (shape)" in checked
    found = [line for line in shellcheck_findings(raised.value) if finding in line]
    assert found and all("(every value replaced by a placeholder)" in line for line in found), str(raised.value)
    if finding == "DEPLOYMENT appears unused":  # found where the template assigns it
        name, line, _ = found[0].split(":", 2)
        script = compile_text(dump(example(SEED)), "spec.yaml", lint=False).files[name]
        assert script.splitlines()[int(line) - 1].startswith("readonly DEPLOYMENT="), found[0]


def test_a_value_holding_a_marks_character_leaves_its_script_whole(checked: list[str]) -> None:
    result = compile_text(dump(example(SEED)), "spec.yaml", render_files=False)
    assert result.plan is not None
    plan = replace(result.plan, name="x\x01qy\x02z")  # the rules refuse it; made here past them
    files = render.render(plan)
    assert render.layouts(plan, files) == {}
    lint_scripts(files, LintCache(None), plan=plan)
    assert sorted(checked) == sorted(render.SCRIPTS)  # each checked whole


def test_marks_are_trusted_only_where_they_give_back_the_rendered_script() -> None:
    assert split("a\x01qb\x02c", "abc") is not None
    assert split("a\x01qb\x02c", "abd") is None
    assert split("a\x01qb", "ab") is None  # a value never closed
    assert split("a\x02b", "ab") is None  # a close with no open
    assert split("a\x01xb\x02c", "abc") is None  # no filter writes `x`
    assert split("a\x03b\x01qc\x02\x04", "abc") is None  # no value inside library code


def test_the_values_hold_a_fixed_digest_and_every_other_value_as_written() -> None:
    digest = "0123456789abcdef" * 4
    marked = (
        f"# spec {OPEN}c{digest}{CLOSE}\nreadonly A={OPEN}q'{digest}'{CLOSE}\n"
        f"readonly B={OPEN}q'{digest}x'{CLOSE}\nreadonly C={OPEN}q'{digest}{CLOSE}\n"
    )
    layout = split(marked, re.sub("\x01.|\x02", "", marked))
    assert layout is not None
    fixed = "0" * 64
    assert f"# spec {fixed}\nreadonly A='{fixed}'\nreadonly B='{digest}x'\nreadonly C='{digest}\n" in layout.values.text
