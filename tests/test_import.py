"""`sparkc import RECIPE`: recipes of spark-vllm-docker and sparkrun (test recipes of the same shape, in
tests/recipes/) become specs that validate; what cannot be mapped is a warning naming the recipe key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from compiler.cli.main import cli
from compiler.pipeline import compile_text
from compiler.tools.importer import PLACEHOLDER, RecipeError, import_recipe
from tests.specs import ROOT

RECIPES = ROOT / "tests" / "recipes"


def imported(name: str) -> tuple[dict, tuple[str, ...], str]:
    result = import_recipe((RECIPES / name).read_text(encoding="utf-8"), name)
    return YAML(typ="safe").load(result.spec_text), tuple(map(str, result.warnings)), result.spec_text


@pytest.mark.parametrize("name", ["eugr-style.yaml", "sparkrun-style.yaml"])
def test_the_imported_spec_validates_but_for_its_placeholders(name: str) -> None:
    _, _, text = imported(name)
    result = compile_text(text, "spec.yaml", render_files=False)
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert errors and all(PLACEHOLDER in d.message and "real value" in d.message for d in errors), errors


def test_a_spark_vllm_docker_recipe_maps_its_command_to_fields() -> None:
    spec, warnings, text = imported("eugr-style.yaml")
    engine = spec["engine"]
    assert (engine["kind"], engine["tensor_parallel"], engine["backend"]) == ("vllm", 2, "ray")
    assert (engine["port"], engine["max_model_len"], engine["gpu_memory_utilization"]) == (8000, 65536, 0.8)
    assert engine["trust_remote_code"] is True and engine["reasoning_parser"] == "demo_parser"
    assert spec["model"]["name"] == "demo"  # --served-model-name in the command
    # flags sparkc does not manage stay, placeholders filled, {{ }} unescaped, one word each
    assert engine["args"][:4] == ["--max-num-seqs", "4", "--compilation-config", '{"cudagraph_mode":"PIECEWISE"}']
    assert "--enable-prefix-caching" in engine["args"]
    assert spec["container"] == {
        "image": "vllm-node-demo",
        "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": 1, "NCCL_DEBUG": "WARN"},
        "secrets": ["HF_TOKEN"],
    }
    assert [n["name"] for n in spec["cluster"]["nodes"]] == ["spark-a", "spark-b"]  # tensor_parallel 2
    assert spec["cluster"]["nodes"][1]["ssh"].startswith(PLACEHOLDER)
    assert spec["model"]["path"].startswith(f"/{PLACEHOLDER}/") and text.count(PLACEHOLDER) >= 4
    keys = sorted(w.split(":", 1)[0] for w in warnings)
    assert keys == ["build_args", "cluster_only", "command", "defaults.unused_knob", "env.HF_TOKEN", "mods"]
    assert any("{kv_dtype}" in w for w in warnings)


def test_a_sparkrun_recipe_maps_runtime_and_model_path() -> None:
    spec, warnings, _ = imported("sparkrun-style.yaml")
    assert spec["engine"]["kind"] == "sglang" and spec["engine"]["port"] == 30000
    assert spec["model"]["mount"] == "/models" and spec["model"]["name"] == "tiny"
    assert spec["engine"]["args"] == ["--tool-call-parser", "qwen3_coder"]
    assert len(spec["cluster"]["nodes"]) == 1
    assert sorted(w.split(":", 1)[0] for w in warnings) == ["benchmark", "command", "max_nodes"]
    assert any("--nnodes" in w and "cluster.nodes" in w for w in warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "mapping"),
        ("name: x\ncommand: vllm serve m\n", "needs 'container'"),
        ("name: x\ncontainer: img\nruntime: llama-cpp\ncommand: llama-server\n", "sparkc runs vllm and sglang"),
    ],
)
def test_what_is_not_a_usable_recipe_is_refused(text: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        import_recipe(text, "r.yaml")


def test_the_command_writes_the_spec_and_lists_warnings(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    done = CliRunner().invoke(cli, ["import", str(RECIPES / "eugr-style.yaml"), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "eugr-style.yaml:10:1: warning: mods: not mapped" in done.output
    assert YAML(typ="safe").load(out.read_text())["engine"]["kind"] == "vllm"
    missing = CliRunner().invoke(cli, ["import", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "no such file" in missing.output


BASE = "name: x\ncontainer: img\nmodel: org/m\ncommand: vllm serve m\n"


@pytest.mark.parametrize(
    ("extra", "key", "at"),
    [
        ("defaults: {port: abc}", "defaults.port", "5:18"),
        ("defaults:\n  port: [8000]", "defaults.port", "6:9"),
        ("defaults: {port: null}", "defaults.port", "5:18"),
        ("defaults: {port: true}", "defaults.port", "5:18"),
        ("defaults: {tensor_parallel: .inf}", "defaults.tensor_parallel", "5:29"),
        ("defaults: {max_model_len: 1e400}", "defaults.max_model_len", "5:27"),
        ("defaults: {max_model_len: 1.5}", "defaults.max_model_len", "5:27"),
        ("defaults: {gpu_memory_utilization: .nan}", "defaults.gpu_memory_utilization", "5:36"),
        ("defaults: {host: [a]}", "defaults.host", "5:18"),
        ("defaults: 7", "defaults", "5:11"),
        ("min_nodes: abc", "min_nodes", "5:12"),
        ("min_nodes: [1]", "min_nodes", "5:12"),
        ("min_nodes: .inf", "min_nodes", "5:12"),
        ("min_nodes: 100000000", "min_nodes", "5:12"),  # one node each: the first 26 are written
        ("defaults: {tensor_parallel: 1000000000}", "defaults.tensor_parallel", "5:29"),
    ],
)
def test_a_value_of_the_wrong_kind_is_a_warning_at_its_line(tmp_path: Path, extra: str, key: str, at: str) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(BASE + extra + "\n", encoding="utf-8")
    done = CliRunner().invoke(cli, ["import", str(recipe)])
    assert done.exit_code == 0, done.output
    assert f"r.yaml:{at}: warning: {key}: " in done.stderr
    assert "Traceback" not in done.output
    spec = YAML(typ="safe").load(done.stdout)
    assert 1 <= len(spec["cluster"]["nodes"]) <= 26


@pytest.mark.parametrize("flag", ["--port \u00b2", "--gpu-memory-utilization 1.2.3", "--tensor-parallel-size \u0663"])
def test_a_flag_value_that_is_no_number_stays_text_for_validate_to_report(flag: str) -> None:
    result = import_recipe(f"container: img\ncommand: vllm serve m {flag}\n", "r.yaml")
    assert flag.split()[1] in YAML(typ="safe").load(result.spec_text)["engine"].values()


def test_text_from_the_recipe_cannot_leave_its_comment() -> None:
    """A line break in the model id (shown in a comment) or in a key (named in a warning comment)
    stays inside the comment: the spec holds only what sparkc wrote."""
    recipe = (
        'container: img\nmodel: "org/m\\nengine: {kind: evil}\\n# x"\n'
        '"k\\nengine:\\n  kind: evil": 1\n"\\e[2J\\u2028": 2\n'
    )
    result = import_recipe(recipe, "r\n.yaml")
    spec = YAML(typ="safe").load(result.spec_text)
    assert list(spec) == ["sparkc", "name", "cluster", "container", "model", "engine"]
    assert spec["engine"] == {"kind": "vllm"}
    comments = [line for line in result.spec_text.splitlines() if line.lstrip().startswith("#")]
    assert len(comments) == 3 and all(c.isprintable() for c in result.spec_text.splitlines())
    assert "\x1b" not in "".join(map(str, result.warnings))
