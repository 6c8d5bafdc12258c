"""Inputs the fuzz tests (tests/fuzz/test_fuzz.py) found sparkc getting wrong, one test each.

A bug found and not fixed yet gets a strict xfail here naming the (module, function) of its crash,
and that pair in tests/fuzzing.KNOWN_BUGS; the xfail turns red once it is fixed. None is open now.
"""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

from tests.fuzzing import cpu_budget, run_cli
from tests.product import SPARKC
from tests.specs import compile_spec, diagnostics_text, dump, example, with_changes

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs them with the fuzz tests (plain `pytest` runs them too)

SOLO = example("solo-qwen3-32b")


def refused(changes: dict[str, object], base: dict[str, object] = SOLO) -> str:
    """The diagnostics of a spec that must be refused (not crash, not compile)."""
    result = compile_spec(with_changes(base, changes), render_files=False)
    assert not result.ok, "compiled, but should have been refused"
    return diagnostics_text(result)


# -- fixed --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("section", ["container.env", "engine.env", "cluster.nodes.0.env", "container.ulimits"])
def test_a_name_with_a_newline_at_its_end_is_refused_where_it_is_written(section: str) -> None:
    # The schema's name patterns end in `$`, which in Python also matches before a final newline.
    text = dump(with_changes(SOLO, {section: {"nofile\n": 1}}))
    key_line = next(i for i, line in enumerate(text.splitlines(), 1) if '"nofile\\n"' in line)
    result = compile_spec(text, render_files=False)
    assert not result.ok
    assert f"spec.yaml:{key_line}:" in diagnostics_text(result)
    assert "control characters (newline, tab, ...) are not allowed in names" in diagnostics_text(result)


def test_half_of_a_surrogate_pair_is_a_spec_error_not_a_crash(tmp_path: Path) -> None:
    # YAML's "\ud83d\ude00" (JSON's way to write U+1F600) gives two lone surrogates, which no file holds:
    # rendering the scripts raised UnicodeEncodeError (exit 3). The loader now refuses the escape.
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(SOLO).replace("name: qwen3-32b\nengine", 'name: "q\\ud83d\\ude00"\nengine'), encoding="utf-8")
    run = run_cli(["compile", str(spec), "-o", str(tmp_path / "build")])
    assert run.code == 1, run.err
    assert f"{spec}:13:9:" in run.err and "surrogate" in run.err
    assert not (tmp_path / "build").exists()


def test_gpu_memory_utilization_nan_is_a_spec_error() -> None:
    # Every comparison with NaN is false, so it passed the schema's 0 < x <= 1 and reached the engine.
    text = refused({"engine.gpu_memory_utilization": float("nan")})
    assert "engine.gpu_memory_utilization:" in text and "nan" in text


@pytest.mark.parametrize("timeout", [2**31, 2**63 - 1, 2**63 + 5])
def test_a_launch_timeout_past_bash_arithmetic_is_refused(timeout: int) -> None:
    # SPARKC_DEADLINE=$((SECONDS + SPARKC_TIMEOUT)) wrapped to a negative number: the launch gave up at once.
    assert f"launch.timeout: {timeout} seconds overflows" in refused({"launch.timeout": timeout})


def test_the_longest_launch_timeout_compiles() -> None:
    assert compile_spec(with_changes(SOLO, {"launch.timeout": 2**31 - 1}), render_files=False).ok


def test_a_huge_tensor_parallel_with_an_architecture_is_refused_at_once() -> None:
    # The suggested layout was searched from tensor_parallel x pipeline_parallel down to 1: for ever.
    base = example("qwen3-32b-2spark-ray-crosscabled")
    with cpu_budget(30):
        text = refused({"engine.tensor_parallel": 2**40}, base)
    assert "tensor_parallel 1099511627776 does not divide the model's 64 attention heads" in text
    assert "try tensor_parallel: 2, pipeline_parallel: 1" in text  # the layout the nodes' 2 GPUs take


# -- fixed in the loader (its input hardening) ---------------------------------------------------------


def assert_refused_cleanly(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    run = run_cli(["validate", str(spec)])
    assert "hit a bug" not in run.err and "Traceback" not in run.err, run.err
    assert run.code == 1 and str(spec) in run.err, run.err


def test_a_control_character_in_the_yaml_is_a_spec_error(tmp_path: Path) -> None:
    assert_refused_cleanly(tmp_path, "sparkc: 1\n\x01name: x\n")


@pytest.mark.parametrize(
    "text",
    [
        'sparkc: !!int ""\n',  # IndexError
        "sparkc: !!float x\n",  # ValueError
        "sparkc: !!bool x\n",  # KeyError
        "sparkc: !!timestamp 2001-13-45\n",  # ValueError
        "<<: [1, 2]\n",  # ConstructorError: merge of something other than mappings
        "sparkc: !!map [1]\n",  # ConstructorError
        "sparkc: !!omap [a: 1, a: 2]\n",  # AssertionError inside ruamel
    ],
)
def test_a_tag_whose_value_cannot_be_built_is_a_spec_error(tmp_path: Path, text: str) -> None:
    assert_refused_cleanly(tmp_path, text)


def test_deep_nesting_is_a_spec_error(tmp_path: Path) -> None:
    assert_refused_cleanly(tmp_path, "sparkc: " + "[" * 1000 + "]" * 1000 + "\n")


def test_an_alias_inside_its_own_anchor_is_a_spec_error(tmp_path: Path) -> None:
    assert_refused_cleanly(tmp_path, "sparkc: 1\nname: &a [*a]\n")


def _small_limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (5, 5))
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_nested_aliases_are_refused_within_bounded_time_and_memory(tmp_path: Path) -> None:
    # Nine levels of ten aliases each: 10^9 paths to the first list, 300 bytes of YAML.
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    spec = tmp_path / "spec.yaml"
    spec.write_text("\n".join(levels) + "\n", encoding="utf-8")
    run = subprocess.run(
        [*SPARKC, "validate", str(spec)],
        capture_output=True,
        text=True,
        preexec_fn=_small_limits,
    )
    assert run.returncode == 1 and "hit a bug" not in run.stderr, f"exit {run.returncode}: {run.stderr}"
