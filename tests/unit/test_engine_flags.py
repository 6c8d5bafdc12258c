"""engine.args checked at compile time against the flag table of the image's engine release (flag_tables/,
written from the engines' own parsers): unknown flags, values a flag does not take or lacks, stray words."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.engines.flag_table import newest, read_words, table_for, tables
from compiler.engines.vllm import VLLM
from compiler.plan import flat
from compiler.spec.typed import EngineKind
from tests.specs import compile_spec, diagnostics_text, example, with_changes

VLLM_IMAGE = {"container.image": "vllm/vllm-openai:v0.32.0"}
SGLANG_IMAGE = {"container.image": "lmsysorg/sglang:v0.5.23-cu130"}


def diagnostics(name: str, args: list[str], **changes: Any) -> tuple[list[str], list[str], str]:
    spec = with_changes(example(name), {"engine.args": args, **changes})
    result = compile_spec(spec, render_files=False)
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    warnings = [d.message for d in result.diagnostics if d.severity == "warning"]
    return errors, warnings, diagnostics_text(result)


def vllm(args: list[str]) -> tuple[list[str], list[str], str]:
    return diagnostics("solo-qwen3-32b", args, **VLLM_IMAGE)


def test_each_engine_has_a_table_from_its_parser_with_the_release_it_came_from() -> None:
    assert [t.version for t in tables(EngineKind.VLLM)] == ["0.32.0"]
    assert [t.version for t in tables(EngineKind.SGLANG)] == ["0.5.23"]
    tp = newest(EngineKind.VLLM).options["-tp"]
    assert tp.names == ("--tensor-parallel-size", "-tp") and tp.nargs is None
    assert newest(EngineKind.SGLANG).options["--tensor-parallel-size"].name == "--tp-size"
    assert "--tp" not in newest(EngineKind.SGLANG).options  # only argparse's abbreviation of --tp-size


def test_a_typo_is_an_error_with_a_suggestion_at_its_line_and_column() -> None:
    errors, _, text = vllm(["--enforce-eagre"])
    assert errors == ["--enforce-eagre is not a flag of vLLM 0.32.0; did you mean --enforce-eager?"]
    assert "spec.yaml:" in text and "engine.args[0]: --enforce-eagre" in text


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["--enforce-eager=true"], "--enforce-eager takes no value"),
        (["--enforce-eager", "true"], "'true' would be left over (--enforce-eager takes no value)"),
        (["--max-num-seqs"], "--max-num-seqs needs a value"),
        (["--max-num-seqs", "--enforce-eager"], "--max-num-seqs needs a value"),
        (["--max-num-seqs", "8", "16"], "'16' would be left over"),
        (["--kv-cache-dtype", "fp9"], "--kv-cache-dtype 'fp9' is not one of its choices (did you mean fp8?)"),
        (["--ignore-patterns"], "--ignore-patterns needs a value"),
        (["stray"], "'stray' would be left over (no flag before it takes a value)"),
        (["--enable"], "--enable is ambiguous in vLLM 0.32.0"),
    ],
)
def test_arity_choices_and_stray_words_are_errors(args: list[str], wanted: str) -> None:
    errors, _, _ = vllm(args)
    assert len(errors) == 1 and errors[0].startswith(wanted), errors


@pytest.mark.parametrize(
    "args",
    [
        ["--enforce-eager", "--max-num-seqs", "8"],
        ["--max_num_seqs=8"],  # vLLM's parser reads _ as -
        ["--ignore-patterns", "*.pt", "*.bin"],  # nargs +: every word up to the next flag
        ["--compilation-config.cudagraph_mode", "NONE"],  # a key inside a JSON flag's value
        ["--kv-cache-dtype", "fp8"],
        ["--no-enable-prefix-caching"],
        ["--hf-token"],  # nargs ?: the value may be left out
    ],
)
def test_what_vllm_accepts_passes(args: list[str]) -> None:
    errors, warnings, _ = vllm(args)
    assert errors == [] and warnings == [], errors + warnings


def test_an_abbreviation_works_but_is_a_warning_naming_the_full_flag() -> None:
    errors, warnings, _ = vllm(["--enforce-eag"])
    assert errors == [] and any("abbreviation of --enforce-eager: write --enforce-eager" in w for w in warnings)


def test_sglang_flags_are_checked_against_sglangs_table() -> None:
    errors, _, _ = diagnostics("sglang-qwen3-30b-2spark", ["--mem_fraction_static", "0.75"], **SGLANG_IMAGE)
    assert errors == ["--mem_fraction_static is not a flag of SGLang 0.5.23; did you mean --mem-fraction-static?"]
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metrics"], **SGLANG_IMAGE)
    assert errors == [] and warnings == []


def test_sglang_commands_spell_tensor_parallel_in_full() -> None:
    result = compile_spec(example("sglang-qwen3-30b-2spark"), render_files=False)
    assert result.plan is not None
    words = flat(result.plan.nodes[0].docker_run)
    assert "--tp-size" in words and "--tp" not in words


def test_sglangs_tp_abbreviation_in_engine_args_still_counts_as_the_managed_flag() -> None:
    errors, _, _ = diagnostics("sglang-qwen3-30b-2spark", ["--tp", "4"], **SGLANG_IMAGE)
    assert errors == ["--tp (as --tp-size) is set by sparkc; the plan gives it 2; use engine.tensor_parallel instead"]


def test_an_unknown_release_is_checked_against_the_newest_table_with_a_warning() -> None:
    spark = {"container.image": "lmsysorg/sglang:spark"}  # an old tag that names no release
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metrics"], **spark)
    assert errors == []
    assert warnings == [
        "sparkc cannot tell which SGLang release the image lmsysorg/sglang:spark holds: engine.args are checked "
        "against SGLang 0.5.23, the newest release it knows; name the release in the image's tag (an image "
        "profile's engine_version.from_tag reads it)"
    ]
    _, warnings, _ = vllm([])
    assert warnings == []  # nothing to check, nothing to say


def test_a_release_without_a_table_says_which_table_checked_it() -> None:
    _, warnings, _ = diagnostics("solo-qwen3-32b", ["--enforce-eager"])  # vllm/vllm-openai:v0.11.2
    assert warnings == [
        "sparkc has no flag table for vLLM 0.11.2: engine.args are checked against vLLM 0.32.0; a flag that "
        "release spells otherwise may be reported wrongly"
    ]
    assert table_for(EngineKind.VLLM, "0.11.2").version == "0.32.0"


def test_arity_decides_which_words_are_values() -> None:
    words, problems = read_words(
        newest(EngineKind.VLLM), ("--trust-remote-code", "-tp", "1", "--served-model-name", "a", "b"), VLLM.canonical
    )
    assert problems == []
    assert [(w.text, w.values) for w in words] == [
        ("--trust-remote-code", ()),
        ("-tp", (2,)),
        ("--served-model-name", (4, 5)),
    ]
