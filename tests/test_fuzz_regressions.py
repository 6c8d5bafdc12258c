"""Inputs the fuzz tests (tests/test_fuzz.py) found sparkc getting wrong, one test each.

The strict xfails are bugs not fixed yet (in the loader, which is being reworked): each turns red
once it is fixed; then drop its marker, and its line in tests/fuzzing.KNOWN_BUGS once no xfail
names that (module, function) any more.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzzing import cpu_budget, run_cli
from tests.specs import compile_spec, diagnostics_text, dump, example, with_changes

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


@pytest.mark.parametrize("field", ["model.name", "engine.args", "container.env"])
def test_half_of_a_surrogate_pair_is_refused_not_a_crash(field: str) -> None:
    # YAML's "\ud83d\ude00" (JSON's way to write U+1F600) gives two lone surrogates, which no file holds:
    # rendering the scripts raised UnicodeEncodeError (exit 3).
    value = {"model.name": "q\ud83d\ude00", "engine.args": ["--served-model-name", "q\ud83d\ude00"]}
    text = refused({field: value.get(field, {"GREETING": "q\ud83d\ude00"})})
    assert "\\ud83d is half of a UTF-16 surrogate pair" in text


def test_half_of_a_surrogate_pair_through_the_command_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(SOLO).replace("name: qwen3-32b\nengine", 'name: "q\\ud83d\\ude00"\nengine'), encoding="utf-8")
    run = run_cli(["compile", str(spec), "-o", str(tmp_path / "build")])
    assert run.code == 1, run.err
    assert f"{spec}:13:9: model.name: \\ud83d is half" in run.err


def test_gpu_memory_utilization_nan_is_refused() -> None:
    # Every comparison with NaN is false, so it passed the schema's 0 < x <= 1 and reached the engine.
    assert "gpu_memory_utilization: nan is not a fraction" in refused({"engine.gpu_memory_utilization": float("nan")})


def test_a_huge_tensor_parallel_with_an_architecture_is_refused_at_once() -> None:
    # The suggested layout was searched from tensor_parallel x pipeline_parallel down to 1: for ever.
    base = example("qwen3-32b-2spark-ray-crosscabled")
    with cpu_budget(30):
        text = refused({"engine.tensor_parallel": 2**40}, base)
    assert "tensor_parallel 1099511627776 does not divide the model's 64 attention heads" in text
    assert "try tensor_parallel: 2, pipeline_parallel: 1" in text  # the layout the nodes' 2 GPUs take
