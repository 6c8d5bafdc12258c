"""Properties over generated input (hypothesis): no input gets a traceback or exit 3, and a spec the
rules take compiles to clean scripts, the same bytes every time. Inputs: tests/fuzzing.py.

Fixed and derandomized, so CI runs the same cases each time; `pytest -m fuzz` runs only these.
Bugs found and fixed have their case in tests/fuzz/test_fuzz_regressions.py; known open ones are listed in
fuzzing.KNOWN_BUGS (each with a strict xfail there) and counted here as hypothesis events.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, example, given
from hypothesis import strategies as st

from compiler.output.render import render
from compiler.pipeline import GeneratedScriptError, compile_text
from tests.fuzzing import (
    cpu_budget,
    dump_text,
    dumped_trees,
    edited_examples,
    examples,
    known_bug,
    raw_yaml_text,
    run_cli,
    spec_file,
    valid_leaning_examples,
)
from tests.product import SPARKC
from tests.specs import ROOT, diagnostics_text

pytestmark = pytest.mark.fuzz

COMMANDS = (
    ["validate"],
    ["validate", "--strict"],
    ["validate", "--format", "json"],
    ["explain"],
    ["explain", "--format", "json"],
    ["compile", "--check", "-o"],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def assert_clean_exit(code: int, out: str, err: str, spec: Path) -> None:
    """Exit 0, 1 or 2 and no traceback; a known open bug is counted, not failed (see KNOWN_BUGS)."""
    if code == 3 and (bug := known_bug(err)):
        event(f"known bug: {bug}")
        return
    assert code in (0, 1, 2), f"exit {code}\n--- stderr\n{err}"
    assert "Traceback" not in out + err and "hit a bug" not in err, err
    if code == 1:
        assert str(spec) in out + err, f"the message does not name the spec file:\n{out}{err}"
    event(f"exit {code}")


# -- 1. any YAML text, through the command line ---------------------------------------------------


@examples(500)
@given(text=raw_yaml_text | dumped_trees() | st.binary(max_size=100), command=st.sampled_from(COMMANDS))
def test_any_yaml_gets_an_exit_code_and_no_traceback(workdir: Path, text: str | bytes, command: list[str]) -> None:
    spec = spec_file(workdir, text)
    argv = [*command, str(workdir / "out"), str(spec)] if command[-1] == "-o" else [*command, str(spec)]
    with cpu_budget(60):
        run = run_cli(argv)
    assert_clean_exit(run.code, run.out, run.err, spec)
    if command == ["validate", "--format", "json"] and run.code in (0, 1):
        json.loads(run.out)


def _limits() -> None:
    """In the child: 1 GiB of address space, 60 s of CPU."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))


@examples(6)
@example(text="".join(f"key{i}: [value, {i}, {{a: b}}]\n" for i in range(2000)))  # 60 KB, many keys
@example(text="name: " + "x" * 1_000_000 + "\n")  # one long line
@example(text="- " * 300 + "1\n")  # deep block nesting on one line
@given(text=raw_yaml_text | dumped_trees())
def test_any_yaml_in_a_process_with_bounded_time_and_memory(workdir: Path, text: str) -> None:
    spec = spec_file(workdir, text)
    try:
        run = subprocess.run(
            [*SPARKC, "validate", str(spec)],
            env={**os.environ, "SPARKC_DEBUG": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_limits,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"sparkc validate still running after 120 s on {len(text)} characters")
    assert run.returncode >= 0, f"killed by signal {-run.returncode} (CPU or memory limit)\n{run.stderr}"
    assert_clean_exit(run.returncode, run.stdout, run.stderr, spec)


# -- 2. the examples, edited at random --------------------------------------------------------------


def _known_exception(exc: BaseException) -> str | None:
    return known_bug("".join(traceback.format_exception(exc)))


@st.composite
def edited_texts(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """An edited example as YAML text; sometimes a line is also repeated or dropped (duplicate keys)."""
    name, edits, spec = draw(edited_examples())
    lines = dump_text(spec).splitlines(keepends=True)
    if lines and draw(st.booleans()):
        i = draw(st.integers(0, len(lines) - 1))
        repeat = draw(st.booleans())
        lines[i : i + 1] = [lines[i], lines[i]] if repeat else []
        edits.append(f"{'repeat' if repeat else 'drop'} line {i + 1}")
    return name, edits, "".join(lines)


def assert_located(result: Any) -> None:
    """What the CLI prints works, and every diagnostic has a line and column."""
    text = diagnostics_text(result)
    json.loads(json.dumps(text))
    for d in result.diagnostics:
        assert d.line >= 1 and d.column >= 1, f"no position for {d}\n{text}"


@examples(400)
@given(case=edited_texts())
def test_edited_examples_never_crash_the_compiler(case: tuple[str, list[str], str]) -> None:
    *_, text = case
    try:
        with cpu_budget(60):
            result = compile_text(text, "spec.yaml", render_files=False)
            files = render(result.plan) if result.ok and result.plan else {}
    except Exception as exc:
        if bug := _known_exception(exc):
            event(f"known bug: {bug}")
            return
        raise
    event("compiles" if result.ok else "refused")
    assert_located(result)
    for file, content in files.items():
        content.encode("utf-8")  # what emit writes: a lone surrogate here would be exit 3
        if file.endswith(".json"):
            json.loads(content)


# -- 3. specs the rules take: clean, the same bytes every time, and --check agrees ----------------


def assert_numbers_fit_bash(script: str) -> None:
    """The script's numeric constants, with room to add to them in bash's 64-bit arithmetic."""
    for name, number in re.findall(r"^readonly (\w+)=(\d+)$", script, re.MULTILINE):
        assert int(number) < 2**62, f"{name}={number} overflows bash's arithmetic"


@examples(50)
@given(case=valid_leaning_examples())
def test_valid_specs_compile_to_clean_scripts_the_same_every_time(
    case: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    *_, spec = case
    text = dump_text(spec)
    with cpu_budget(120):
        try:
            first = compile_text(text, "spec.yaml")  # rendered and linted: shellcheck and bash -n
        except GeneratedScriptError as exc:
            pytest.fail(f"a generated script failed the lint (a template bug):\n{exc}")
        if not first.ok:
            event("refused by the rules")
            return
        event("compiles")
        assert_numbers_fit_bash(first.files["launch-cluster.sh"])
        again = compile_text(text, "spec.yaml", render_files=False)
        assert again.plan is not None and again.plan == first.plan
        assert render(again.plan) == first.files


def _sparkc(args: list[str], hash_seed: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run([*SPARKC, *args], cwd=ROOT, env=env, capture_output=True, text=True)


@examples(3)
@given(case=valid_leaning_examples())
def test_compile_then_check_in_other_processes_agree(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, dict[str, Any], dict[str, Any]]
) -> None:
    *_, spec = case
    text = dump_text(spec)
    assume(compile_text(text, "spec.yaml", render_files=False).ok)
    folder = tmp_path_factory.mktemp("check")
    path = spec_file(folder, text)
    out = folder / "build"
    compiled = _sparkc(["compile", str(path), "-o", str(out)], hash_seed="1")
    assert compiled.returncode == 0, compiled.stderr
    checked = _sparkc(["compile", str(path), "-o", str(out), "--check"], hash_seed="2")
    assert checked.returncode == 0, checked.stderr
