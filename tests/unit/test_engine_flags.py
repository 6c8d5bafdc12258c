"""engine.args checked at compile time against the flag table of the image's engine release (flag_tables/,
written from the engines' own parsers): unknown flags, values a flag does not take or lacks, stray words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.engines.flag_table import choose, newest, read_words, releases_with, tables, version_key
from compiler.engines.speculative import METHODS, listed_methods, releases_listing
from compiler.engines.vllm import VLLM
from compiler.pipeline import Beside
from compiler.plan import flat
from compiler.resources import data_dir
from compiler.spec.profiles import load_user_profiles
from compiler.spec.typed import EngineKind
from tests.specs import compile_spec, diagnostics_text, dump, example, with_changes

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


def test_each_engine_has_tables_of_several_releases_each_from_that_releases_parser() -> None:
    for kind in (EngineKind.VLLM, EngineKind.SGLANG):
        shipped = tables(kind)
        assert [t.version for t in shipped] == sorted((t.version for t in shipped), key=version_key)
    assert len(tables(EngineKind.VLLM)) >= 4
    assert {"0.11.2", "0.32.0"} <= {t.version for t in tables(EngineKind.VLLM)}
    for path in sorted(data_dir("flag_tables").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.name == f"{data['engine']}-{data['version']}.json"
        assert data["made"], path.name  # how the table was made: which parser, read how
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
        "sparkc cannot tell which SGLang release the image lmsysorg/sglang:spark holds: engine.args are compared "
        f"with the flag table of SGLang {newest(EngineKind.SGLANG).version}, the newest it has, and what it "
        "refuses is only a warning; to have it refused here, pin the release: a tag that names the release (the "
        "tags of SGLang official image can), or engine_version.release in an image profile of your own for it (a "
        "profiles/ folder beside the spec)"
    ]
    _, warnings, _ = vllm([])
    assert warnings == []  # nothing to check, nothing to say


def test_only_the_releases_own_table_binds_else_the_nearest_below_it_warns() -> None:
    exact = choose(EngineKind.VLLM, "0.11.2")
    assert (exact.table.version, exact.binding) == ("0.11.2", True)
    # A later patch of a line sparkc has: that line's nearest table, only warning (patches add flags).
    patch = choose(EngineKind.VLLM, "0.11.9")
    assert (patch.table.version, patch.binding) == ("0.11.2", False)
    assert patch.nearest == "the nearest earlier release of its line"
    other = choose(EngineKind.VLLM, "0.14.0")  # no table of 0.14.x: the nearest older one
    assert version_key(other.table.version) < (0, 14) and not other.binding
    assert other.nearest == "the nearest earlier one"
    unknown = choose(EngineKind.VLLM, None)
    assert unknown.table == newest(EngineKind.VLLM) and not unknown.binding
    older = choose(EngineKind.VLLM, "0.9.2")  # older than every table: the oldest
    assert older.table == tables(EngineKind.VLLM)[0] and not older.binding and older.nearest == "the oldest it has"


def test_a_release_without_its_own_table_is_only_warned_about_naming_the_table() -> None:
    errors, warnings, _ = diagnostics("solo-qwen3-32b", ["--enforce-eagre"], **{"container.image": OLD_LINE})
    assert errors == []
    table = choose(EngineKind.VLLM, "0.14.0").table.version
    assert warnings[0] == (
        f"sparkc has no flag table of vLLM 0.14.0: engine.args are compared with the flag table of vLLM {table}, "
        "the nearest earlier one, and what it refuses is only a warning"
    )
    assert warnings[1].startswith(f"--enforce-eagre is not a flag of vLLM {table}; did you mean --enforce-eager?")
    assert warnings[1].endswith("(only a warning: sparkc has no table of its release)")
    errors, warnings, _ = diagnostics("solo-qwen3-32b", ["--enforce-eagre"], **{"container.image": LATER_PATCH})
    assert errors == [] and warnings[0] == (
        "sparkc has no flag table of vLLM 0.11.9: engine.args are compared with the flag table of vLLM 0.11.2, the "
        "nearest earlier release of its line, and what it refuses is only a warning"
    )


# The public deployments this guards, written anew: eugr/spark-vllm-docker's recipes run on the image its
# build script makes (vllm-node, a vLLM of no stated release; its --exp-mxfp4 build, Dockerfile.mxfp4, adds
# --mxfp4-backend and --mxfp4-layers), and specs that pass --swap-space, which vLLM 0.11 takes and later
# releases dropped.
EUGR_NODE = {"container.image": "vllm-node"}
OLD_LINE = "vllm/vllm-openai:v0.14.0"
LATER_PATCH = "vllm/vllm-openai:v0.11.9"
PINNED_PROFILE = """\
family: a vLLM build of a known release
match: [vllm-node]
engine: vllm
args: command
ray: present
auto: keep
engine_version: {release: "0.32.0"}
sources: [the build's Dockerfile]
"""


def _located(args: list[str], changes: dict[str, Any], beside: Beside | None = None) -> tuple[list[Any], str, str]:
    text = dump(with_changes(example("solo-qwen3-32b"), {"engine.args": args, **changes}))
    result = compile_spec(text, render_files=False, beside=beside or Beside())
    return result.diagnostics, diagnostics_text(result), text


def _line_column(text: str, word: str) -> str:
    """`spec.yaml:LINE:COL` of the list item `word` in the dumped spec."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() == f"- {word}":
            return f"spec.yaml:{number}:{line.index('-') + 3}"
    raise AssertionError(f"{word} not in the spec")


def test_swap_space_on_an_image_of_unknown_release_compiles_with_a_warning_naming_the_table() -> None:
    found, text, _ = _located(["--swap-space", "16"], EUGR_NODE)
    assert [d for d in found if d.severity == "error"] == []
    newest_vllm = newest(EngineKind.VLLM).version
    warned = [d.message for d in found if d.severity == "warning"]
    assert any(f"checked against vLLM {newest_vllm}" in w or f"flag table of vLLM {newest_vllm}" in w for w in warned)
    assert "pin the release" in text
    flag = next(w for w in warned if w.startswith("--swap-space"))
    having = releases_with(EngineKind.VLLM, "--swap-space")
    assert "0.11.2" in having and newest_vllm not in having
    assert flag.startswith(f"--swap-space is not a flag of vLLM {newest_vllm}; vLLM {', '.join(having)} ")
    assert flag.endswith("(only a warning: sparkc does not know the image's release)")


def test_swap_space_on_a_profile_pinned_to_0_32_is_an_error_at_its_line_and_column_with_the_fix(
    tmp_path: Path,
) -> None:
    (tmp_path / "ours.yaml").write_text(PINNED_PROFILE, encoding="utf-8")
    beside = Beside(profiles=load_user_profiles(tmp_path))
    found, text, spec = _located(["--enforce-eager", "--swap-space", "16"], EUGR_NODE, beside)
    errors = [d for d in found if d.severity == "error"]
    assert [d.message for d in errors] == [
        f"--swap-space is not a flag of vLLM 0.32.0; vLLM {', '.join(releases_with(EngineKind.VLLM, '--swap-space'))} "
        f"{'has' if len(releases_with(EngineKind.VLLM, '--swap-space')) == 1 else 'have'} it: remove it, or use an "
        "image of a release that has it"
    ]
    assert f"{_line_column(spec, '--swap-space')}: engine.args[1]: --swap-space is not a flag" in text
    assert [d.message for d in found if d.severity == "warning" and "engine.args" in d.message] == []


def test_mxfp4_flags_of_a_custom_build_compile_with_a_warning() -> None:
    found, _, _ = _located(["--mxfp4-backend", "X", "--mxfp4-layers", "moe"], EUGR_NODE)
    assert [d.message for d in found if d.severity == "error"] == []
    warned = [d.message for d in found if d.severity == "warning"]
    assert any(w.startswith("--mxfp4-backend is not a flag of vLLM") for w in warned)
    assert any(w.startswith("--mxfp4-layers is not a flag of vLLM") for w in warned)


def test_a_flag_the_known_release_has_compiles_clean() -> None:
    errors, warnings, _ = diagnostics("solo-qwen3-32b", ["--swap-space", "16"])  # vllm/vllm-openai:v0.11.2
    assert errors == [] and warnings == []
    errors, _, _ = vllm(["--swap-space", "16"])  # the same on vLLM 0.32.0, which dropped it
    assert len(errors) == 1 and errors[0].startswith("--swap-space is not a flag of vLLM 0.32.0")


def test_an_ngc_tag_names_the_vllm_release_its_release_notes_list() -> None:
    # NVIDIA's vLLM container release notes: 26.03 holds vLLM 0.17.1, which takes --swap-space; 26.10 holds 0.31.0.
    ngc = "nvcr.io/nvidia/vllm:{}-py3"
    errors, warnings, _ = diagnostics(
        "solo-qwen3-32b", ["--swap-space", "16"], **{"container.image": ngc.format("26.03")}
    )
    assert errors == [] and not any("engine.args" in w for w in warnings)
    errors, _, _ = diagnostics("solo-qwen3-32b", ["--swap-space", "16"], **{"container.image": ngc.format("26.10")})
    assert len(errors) == 1 and errors[0].startswith("--swap-space is not a flag of vLLM 0.31.0")
    errors, warnings, _ = diagnostics(
        "solo-qwen3-32b", ["--swap-space", "16"], **{"container.image": ngc.format("26.02")}
    )
    assert errors == [] and any(w.startswith("sparkc cannot tell which vLLM release") for w in warnings)


def test_sglang_follows_the_same_rule() -> None:
    table = newest(EngineKind.SGLANG).version
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metricz"], **SGLANG_IMAGE)
    assert errors == [f"--enable-metricz is not a flag of SGLang {table}; did you mean --enable-metrics?"]
    spark = {"container.image": "lmsysorg/sglang:spark"}  # names no release
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metricz"], **spark)
    assert errors == [] and warnings[1].startswith(f"--enable-metricz is not a flag of SGLang {table}")
    older = {"container.image": "lmsysorg/sglang:v0.5.1-cu130"}  # before every table sparkc has
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metricz"], **older)
    assert errors == [] and warnings[0].startswith("sparkc has no flag table of SGLang 0.5.1: engine.args are")
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--enable-metrics"], **SGLANG_IMAGE)
    assert errors == [] and warnings == []


def sglang_image(tag: str) -> dict[str, str]:
    return {"container.image": f"lmsysorg/sglang:{tag}"}


def test_an_sglang_image_is_checked_against_its_own_releases_table() -> None:
    """Spark users run several SGLang releases (the spark tag's 0.5.3.post3, community 0.5.8/0.5.9 images,
    the pinned -cu130 builds): a flag one of them lacks is an error for an image of that release only."""
    assert {"0.5.3.post3", "0.5.9", "0.5.23"} <= {t.version for t in tables(EngineKind.SGLANG)}
    newer = ["--allowed-media-domains", "example.com"]  # in 0.5.23's parser, not in 0.5.9's
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", newer, **sglang_image("v0.5.9-cu130"))
    assert len(errors) == 1 and errors[0].startswith("--allowed-media-domains is not a flag of SGLang 0.5.9")
    assert "SGLang 0.5.23" in errors[0]  # names the releases that take it
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", newer, **SGLANG_IMAGE)
    assert errors == [] and warnings == []
    # And the other way: 0.5.23 split --cuda-graph-bs into its -decode/-prefill flags.
    older = ["--cuda-graph-bs", "1", "2", "4"]
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", older, **sglang_image("v0.5.9-cu130"))
    assert errors == [] and warnings == []
    errors, _, _ = diagnostics("sglang-qwen3-30b-2spark", older, **SGLANG_IMAGE)
    assert errors and errors[0].startswith("--cuda-graph-bs is not a flag of SGLang 0.5.23")


def test_a_post_release_tag_names_its_own_release() -> None:
    image = sglang_image("v0.5.3.post3-cu130")
    errors, _, _ = diagnostics("sglang-qwen3-30b-2spark", ["--admin-api-key", "k"], **image)
    assert len(errors) == 1 and errors[0].startswith("--admin-api-key is not a flag of SGLang 0.5.3.post3")
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--admin-api-key", "k"], **sglang_image("v0.5.9"))
    assert errors == [] and warnings == []


def test_an_sglang_release_between_tables_warns_naming_the_nearest_earlier_table() -> None:
    between = choose(EngineKind.SGLANG, "0.5.10")
    assert between.table.version == "0.5.9" and not between.binding
    image = sglang_image("v0.5.10-cu130")
    errors, warnings, _ = diagnostics("sglang-qwen3-30b-2spark", ["--allowed-media-domains", "example.com"], **image)
    assert errors == []
    assert warnings[0].startswith("sparkc has no flag table of SGLang 0.5.10: engine.args are")
    assert "SGLang 0.5.9, the nearest earlier release of its line" in warnings[0]
    assert warnings[1].startswith("--allowed-media-domains is not a flag of SGLang 0.5.9")


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


def test_the_speculative_methods_a_release_takes_come_from_its_tables_method_list() -> None:
    """vLLM's --spec-method lists them from 0.26 on; an older table, and SGLang's, list none."""
    by_release = {t.version: listed_methods(t) for t in tables(EngineKind.VLLM)}
    listing = [v for v, methods in by_release.items() if methods is not None]
    assert listing and min(listing, key=version_key) == "0.26.0"
    assert all(by_release[v] is None for v in by_release if version_key(v) < (0, 26))
    assert releases_listing(EngineKind.VLLM, "dflash") == tuple(sorted(listing, key=version_key))
    assert listed_methods(newest(EngineKind.SGLANG)) is None
    # Every method sparkc writes for vLLM is one the newest release lists.
    names = {info.names[EngineKind.VLLM] for info in METHODS.values() if EngineKind.VLLM in info.names}
    assert names <= (listed_methods(newest(EngineKind.VLLM)) or frozenset())
