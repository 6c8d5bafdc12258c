"""`sparkc import RECIPE`: recipes of spark-vllm-docker and sparkrun (test recipes of the same shape, in
tests/recipes/) become specs that validate; what cannot be mapped is a warning naming the recipe key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from compiler.cli.main import cli
from compiler.pipeline import compile_text
from compiler.resolve.rules.cluster import is_placeholder_left
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
    assert errors and all(is_placeholder_left(d) for d in errors), errors


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
        # build_args: [--rebuild-vllm] only busts docker's cache (a warning): the repository's Dockerfile as it is
        "build": {"context": f"/{PLACEHOLDER}/spark-vllm-docker", "dockerfile": "Dockerfile", "args": {}},
    }
    assert [n["name"] for n in spec["cluster"]["nodes"]] == ["spark-a", "spark-b"]  # tensor_parallel 2
    assert spec["cluster"]["nodes"][1]["ssh"].startswith(PLACEHOLDER)
    assert spec["model"]["path"].startswith(f"/{PLACEHOLDER}/") and text.count(PLACEHOLDER) >= 4
    keys = sorted(w.split(":", 1)[0] for w in warnings)
    assert keys == ["build_args", "command", "defaults.unused_knob", "env.HF_TOKEN", "mods.0"]
    assert any("{kv_dtype}" in w for w in warnings)


def test_a_sparkrun_recipe_maps_runtime_and_model_path() -> None:
    spec, warnings, _ = imported("sparkrun-style.yaml")
    assert spec["engine"]["kind"] == "sglang" and spec["engine"]["port"] == 30000
    assert spec["model"]["mount"] == "/models" and spec["model"]["name"] == "tiny"
    assert spec["engine"]["args"] == ["--tool-call-parser", "qwen3_coder"]
    assert len(spec["cluster"]["nodes"]) == 1
    assert sorted(w.split(":", 1)[0] for w in warnings) == ["benchmark", "command"]  # max_nodes: nothing lost
    assert any("--nnodes" in w and "cluster.nodes" in w for w in warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "mapping"),
        ("name: x\ncommand: vllm serve m\n", "needs 'container'"),
        (
            "name: x\ncontainer: img\nruntime: llama-cpp\ncommand: llama-server\n",
            "sparkc runs eugr-vllm, eugr-vllm-ray, sglang, vllm",
        ),
    ],
)
def test_what_is_not_a_usable_recipe_is_refused(text: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        import_recipe(text, "r.yaml")


def test_the_command_writes_the_spec_and_lists_warnings(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    recipe = tmp_path / "r.yaml"
    text = (RECIPES / "eugr-style.yaml").read_text(encoding="utf-8")
    recipe.write_text(text.replace("build_args:\n  - --rebuild-vllm\n", ""), encoding="utf-8")
    done = CliRunner().invoke(cli, ["import", str(recipe), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "r.yaml:9:5: warning: mods.0: the mod mods/fix-something is not applied" in done.output
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


def _engine(recipe: str) -> tuple[dict, tuple[str, ...]]:
    result = import_recipe(recipe, "r.yaml")
    return YAML(typ="safe").load(result.spec_text), tuple(map(str, result.warnings))


@pytest.mark.parametrize(
    ("runtime", "backend"),
    [
        ("vllm-ray", "ray"),
        ("eugr-vllm-ray", "ray"),
        ("vllm-distributed", "native"),
        ("vllm", "native"),
        ("eugr-vllm", "ray"),
    ],
)
def test_every_runtime_name_of_sparkrun_and_eugr_runs_as_its_launcher_would(runtime: str, backend: str | None) -> None:
    spec, _ = _engine(f"container: img\nruntime: {runtime}\ncommand: vllm serve m -tp 2\n")
    assert spec["engine"]["kind"] == "vllm" and spec["engine"].get("backend") == backend


def test_sglang_serve_is_read_as_sglangs_program() -> None:
    spec, warnings = _engine("container: img\nruntime: sglang\ncommand: sglang serve --model-path /m --tp 2\n")
    assert spec["engine"]["tensor_parallel"] == 2 and "args" not in spec["engine"], spec
    assert not any("does not start with" in w for w in warnings)


@pytest.mark.parametrize(
    ("command", "kind"),
    [("/usr/local/bin/vllm serve m -tp 2", "vllm"), ("python3.12 -m sglang.launch_server --tp-size 2", "sglang")],
)
def test_an_engine_named_by_its_path_or_pythons_version_is_still_the_engine(command: str, kind: str) -> None:
    runtime = "sglang" if kind == "sglang" else "vllm"
    spec, warnings = _engine(f"container: img\nruntime: {runtime}\ncommand: {command}\n")
    assert spec["engine"]["tensor_parallel"] == 2 and not any("command" in w for w in warnings), warnings


@pytest.mark.parametrize(
    "command",
    ["python3 serve_my_model.py --port 8000", "llama-server -m /m.gguf --port 8000", "text-generation-launcher"],
)
def test_a_command_that_runs_another_server_is_refused_not_swapped_for_vllm(command: str) -> None:
    result = import_recipe(f"container: img\ncommand: {command}\n", "r.yaml")
    [error] = result.errors
    assert (error.line, error.column) == (2, 10) and "not an engine sparkc starts" in str(error)
    assert f"runs {' '.join(command.split()[:3])}," in str(error)


@pytest.mark.parametrize(
    "where",
    [
        "defaults: {max_model_len: auto}\n",
        "defaults: {max_model_len: auto}\ncommand: vllm serve m --max-model-len {max_model_len}\n",
    ],
)
def test_max_model_len_auto_is_carried_as_vllms_auto(tmp_path: Path, where: str) -> None:
    """vLLM's `--max-model-len auto` fits the context to the KV cache at start, which is not its default."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("container: img\n" + where, encoding="utf-8")
    done = CliRunner().invoke(cli, ["import", str(recipe)])
    assert done.exit_code == 0, done.output
    spec = YAML(typ="safe").load(done.stdout)
    assert spec["engine"]["max_model_len"] == "auto"
    assert "max_model_len" not in done.stderr


def test_the_flag_table_decides_what_is_a_value() -> None:
    spec, warnings = _engine(
        "container: img\ncommand: vllm serve m --trust-remote-code -tp 2 --enforce-eager --ignore-patterns a b\n"
    )
    engine = spec["engine"]
    assert engine["trust_remote_code"] is True and engine["tensor_parallel"] == 2
    assert engine["args"] == ["--enforce-eager", "--ignore-patterns", "a", "b"]  # nargs +: both kept
    assert warnings == ()


def test_several_served_names_become_the_name_and_its_aliases() -> None:
    spec, warnings = _engine("container: img\ncommand: vllm serve m --served-model-name a b a c b --enforce-eager\n")
    assert spec["model"]["name"] == "a" and spec["model"]["aliases"] == ["b", "c"]  # each once, in order
    assert spec["engine"]["args"] == ["--enforce-eager"] and warnings == ()
    one, _ = _engine("container: img\ncommand: vllm serve m --served-model-name a\n")
    assert one["model"]["name"] == "a" and "aliases" not in one["model"]


def test_a_placeholder_without_a_value_drops_its_flag_with_a_warning_not_a_stray_word() -> None:
    spec, warnings = _engine("container: img\ncommand: vllm serve {model} --kv-cache-dtype {kv} --enforce-eager\n")
    assert spec["engine"]["args"] == ["--enforce-eager"]
    assert warnings == (
        "command: --kv-cache-dtype {kv}: the recipe's defaults give {kv} no value; left out (the engine's default "
        "applies): add --kv-cache-dtype with a value to engine.args",
    )  # and none for {model}: the positional model is the spec's model


@pytest.mark.parametrize(
    ("options", "dockerfile", "args"),
    [
        ("[--pre-tf]", "Dockerfile", {"PRE_TRANSFORMERS": "1"}),
        ("[--tf5, --pre-flashinfer]", "Dockerfile", {"PRE_TRANSFORMERS": "1", "FLASHINFER_PRE": "--pre"}),
        ("[--exp-mxfp4, --vllm-ref, v0.11.1, -j, '8']", "Dockerfile.mxfp4", {"VLLM_REF": "v0.11.1", "BUILD_JOBS": "8"}),
        ("[--use-wheels, release]", "Dockerfile.wheels", {"WHEELS_FROM_GITHUB_RELEASE": "1"}),
        ("[--use-wheels, --triton-ref, v3.6.0]", "Dockerfile.wheels", {"TRITON_REF": "v3.6.0"}),
        ("'--pre-tf -t other --copy-to spark-b spark-c --copy-parallel'", "Dockerfile", {"PRE_TRANSFORMERS": "1"}),
    ],
)
def test_build_args_become_the_docker_build_that_build_and_copy_runs(options: str, dockerfile: str, args: dict) -> None:
    spec, warnings = _engine(f"container: vllm-node-x\nbuild_args: {options}\ncommand: vllm serve m\n")
    build = spec["container"]["build"]
    assert build == {"context": "/PLACEHOLDER/spark-vllm-docker", "dockerfile": dockerfile, "args": args}
    assert warnings == ()  # the tag is container.image, the copy distribute.sh's


def test_a_build_option_without_a_docker_build_equivalent_is_an_error_and_a_cache_bust_a_warning() -> None:
    unknown = import_recipe(
        "container: img\nbuild_args: [--pre-tf, --apply-vllm-pr, '123']\ncommand: vllm serve m\n", "r.yaml"
    )
    assert [(w.key, w.error) for w in unknown.warnings] == [("build_args", True)]
    assert "'--apply-vllm-pr': not an option sparkc can carry into docker build" in unknown.warnings[0].message
    missing = import_recipe("container: img\nbuild_args: [--vllm-ref]\ncommand: vllm serve m\n", "r.yaml")
    assert [w.message for w in missing.errors] == ["--vllm-ref needs a value, as build-and-copy.sh reads it"]
    cache = import_recipe("container: img\nbuild_args: [--rebuild-vllm]\ncommand: vllm serve m\n", "r.yaml")
    assert [(w.key, w.error) for w in cache.warnings] == [("build_args", False)]
    assert "docker's layer cache" in cache.warnings[0].message


def test_a_mod_the_command_depends_on_is_an_error_else_a_warning_naming_what_is_lost() -> None:
    needs = import_recipe(
        "container: img\nmods: [mods/fix-template]\ncommand: vllm serve m --chat-template unsloth.jinja\n", "r.yaml"
    )
    assert [(w.key, w.error) for w in needs.warnings] == [("mods.0", True)]
    assert "names unsloth.jinja, which the mod mods/fix-template puts into the container" in needs.warnings[0].message
    alone = import_recipe("container: img\nmods: [mods/fix-gemm]\ncommand: vllm serve m --enforce-eager\n", "r.yaml")
    assert [(w.key, w.error) for w in alone.warnings] == [("mods.0", False)]
    lost = "the mod mods/fix-gemm is not applied, so what it patches is lost: give the recipe's repository"
    assert lost in alone.warnings[0].message


def test_keys_that_lose_nothing_say_nothing() -> None:
    quiet = import_recipe(
        "container: img\nmods: []\nsolo_only: true\ncluster_only: false\nmax_nodes: 2\ncommand: vllm serve m\n",
        "r.yaml",
    )
    assert quiet.warnings == ()


def test_a_recipe_without_a_command_gets_the_flags_sparkruns_launcher_builds_from_its_defaults() -> None:
    spec, warnings = _engine(
        "container: img\nruntime: vllm-ray\ndefaults:\n  tensor_parallel: 2\n  max_num_seqs: 8\n  enforce_eager: true\n"
        "  served_model_name: x\n  kv_cache_dtype: fp8\n"
    )
    assert spec["engine"]["tensor_parallel"] == 2 and spec["model"]["name"] == "x"
    assert spec["engine"]["args"] == ["--max-num-seqs", "8", "--kv-cache-dtype", "fp8", "--enforce-eager"]
    assert warnings == ()
    spec, _ = _engine("container: img\nruntime: sglang\ndefaults: {tensor_parallel: 2, max_num_seqs: 4}\n")
    assert spec["engine"]["tensor_parallel"] == 2 and spec["engine"]["args"] == ["--max-running-requests", "4"]


SPECULATIVE = "container: img\nmodel: org/M\ncommand: |\n  vllm serve org/M --speculative-config '{config}'\n"


def test_a_draft_named_by_repo_id_becomes_a_draft_to_fetch_with_a_placeholder_path() -> None:
    config = '{"method":"eagle3","model":"org/M-eagle3","num_speculative_tokens":3}'
    spec, warnings = _engine(SPECULATIVE.replace("{config}", config))
    draft = {
        "path": f"/{PLACEHOLDER}/models/M-eagle3",
        "repo": "org/M-eagle3",
        "method": "eagle3",
        "num_speculative_tokens": 3,
    }
    assert spec["model"]["draft"] == draft and "args" not in spec["engine"]
    assert len(warnings) == 1 and "the draft org/M-eagle3 is named by its Hugging Face id" in warnings[0]
    assert "fetch-model.sh downloads into model.draft.path" in warnings[0]


def test_a_draft_by_repo_id_in_a_config_the_spec_cannot_carry_is_an_error() -> None:
    config = '{"method":"eagle3","model":"org/M-eagle3","num_speculative_tokens":3,"draft_tensor_parallel_size":1}'
    result = import_recipe(SPECULATIVE.replace("{config}", config), "r.yaml")
    assert [w.error for w in result.warnings] == [True]
    assert "names the draft org/M-eagle3 by its Hugging Face id" in result.warnings[0].message


@pytest.mark.parametrize(
    ("flags", "draft"),
    [
        (
            """--speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'""",
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
        ),
        ("""-sc '{"model":"[ngram]","num_speculative_tokens":5}'""", {"method": "ngram", "num_speculative_tokens": 5}),
        ("--spec-method deepseek_mtp --spec-tokens 2", {"method": "mtp", "num_speculative_tokens": 2}),
        ("""--speculative-config '{"method":"suffix"}'""", {"method": "suffix"}),
        (
            """--speculative-config '{"method":"medusa"}' --spec-model /srv/medusa""",
            {"method": "medusa", "path": "/srv/medusa"},
        ),
    ],
)
def test_every_vllm_method_the_spec_can_hold_becomes_model_draft(flags: str, draft: dict[str, object]) -> None:
    spec, warnings = _engine(f"container: img\ncommand: vllm serve org/M {flags}\n")
    assert spec["model"]["draft"] == draft and "args" not in spec["engine"] and warnings == ()


def test_speculative_flags_the_spec_cannot_hold_stay_the_engines_to_judge() -> None:
    # vLLM refuses a shorthand flag that repeats a key of the config: kept as written, for vLLM to say so.
    flags = """--speculative-config '{"method":"ngram","num_speculative_tokens":3}' --spec-tokens 4"""
    spec, _ = _engine(f"container: img\ncommand: vllm serve org/M {flags}\n")
    assert "draft" not in spec["model"]
    assert spec["engine"]["args"] == ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3}',
                                      "--spec-tokens", "4"]  # fmt: skip
    tree = "--speculative-algorithm EAGLE --speculative-draft-model-path /d --speculative-num-steps 5 "
    spec, _ = _engine(f"container: img\nruntime: sglang\ncommand: sglang serve --model-path /m {tree}"
                      "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8\n")  # fmt: skip
    assert "draft" not in spec["model"] and "--speculative-eagle-topk" in spec["engine"]["args"]


@pytest.mark.parametrize(
    ("flags", "draft"),
    [
        (
            "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4",
            {"method": "mtp", "num_speculative_tokens": 3},
        ),
        (
            "--speculative-algorithm NGRAM --speculative-num-draft-tokens 8",
            {"method": "ngram", "num_speculative_tokens": 7},
        ),
        (
            "--speculative-algorithm standalone --speculative-draft-model-path /srv/d",
            {"method": "draft_model", "path": "/srv/d"},
        ),
    ],
)
def test_sglangs_speculative_flags_become_model_draft(flags: str, draft: dict[str, object]) -> None:
    spec, warnings = _engine(f"container: img\nruntime: sglang\ncommand: sglang serve --model-path /m {flags}\n")
    assert spec["model"]["draft"] == draft and "args" not in spec["engine"] and warnings == ()


@pytest.mark.parametrize(
    "command",
    ["vllm serve org/Real-Model --enforce-eager", "sglang serve --model-path org/Real-Model --enable-metrics"],
)
def test_a_recipe_without_model_takes_it_from_the_command(command: str) -> None:
    spec, _ = _engine(f"container: img\nruntime: {command.split()[0]}\ncommand: {command}\n")
    assert spec["model"]["name"] == "org/Real-Model" and spec["model"]["path"].endswith("/Real-Model")


def test_volumes_become_mounts_read_write_unless_ro_as_docker_reads_them() -> None:
    listed = "volumes:\n  - /data/templates:/templates:ro\n  - /scratch:/scratch\n  - /a:/b:rw\n"
    spec, warnings = _engine(f"container: img\ncommand: vllm serve m\n{listed}")
    assert spec["container"]["mounts"] == [
        {"host": "/data/templates", "container": "/templates", "readonly": True},
        {"host": "/scratch", "container": "/scratch", "readonly": False},
        {"host": "/a", "container": "/b", "readonly": False},
    ]
    assert not any(w.startswith("volumes") for w in warnings)
    mapped, _ = _engine("container: img\ncommand: vllm serve m\nvolumes: {/srv/cfg: /cfg}\n")
    assert mapped["container"]["mounts"] == [{"host": "/srv/cfg", "container": "/cfg", "readonly": False}]


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        ("hf_cache:/root/.cache", "not a named docker volume or a path relative"),
        ("./models:/models", "not a named docker volume or a path relative"),
        ("/a:/b:z", "is not HOST:CONTAINER[:ro|rw]"),
        ("/only", "is not HOST:CONTAINER[:ro|rw]"),
    ],
)
def test_a_volume_sparkc_cannot_mount_is_an_error_at_its_line(volume: str, message: str) -> None:
    result = import_recipe(f"container: img\ncommand: vllm serve m\nvolumes:\n  - {volume}\n", "r.yaml")
    [error] = result.errors
    assert (error.key, error.line, error.column) == ("volumes.0", 4, 5) and message in error.message


def test_vllm_data_parallel_becomes_fields_and_its_per_node_flags_are_derived() -> None:
    recipe = (
        "container: vllm/vllm-openai:v0.32.0\nruntime: vllm-distributed\ncommand: vllm serve m -dp 2 "
        "--data-parallel-size-local 1 --data-parallel-address 10.0.0.1 --enable-expert-parallel\n"
    )
    spec, warnings = _engine(recipe)
    engine = spec["engine"]
    assert (engine["data_parallel"], engine["expert_parallel"]) == (2, True)
    assert len(spec["cluster"]["nodes"]) == 2  # one replica per Spark
    assert "args" not in engine
    dropped = [w for w in warnings if "is set by sparkc" in w]
    assert len(dropped) == 2 and any("--data-parallel-address" in w for w in dropped)


@pytest.mark.parametrize(
    ("runtime", "written", "meant"),
    [
        # sparkrun fills its recipes' commands without format escapes: a nested JSON value's }} is two braces.
        (
            "runtime: vllm\n",
            '{"level": 3, "pass_config": {"fuse": true}}',
            '{"level": 3, "pass_config": {"fuse": true}}',
        ),
        # spark-vllm-docker's launcher formats the command: {{ and }} are its escapes of { and }.
        ("", '{{"level": 3, "pass_config": {{"fuse": true}}}}', '{"level": 3, "pass_config": {"fuse": true}}'),
    ],
)
def test_a_json_value_keeps_its_braces_as_the_recipes_own_launcher_reads_them(
    runtime: str, written: str, meant: str
) -> None:
    recipe = f"container: img\nmodel: org/m\n{runtime}command: |\n  vllm serve org/m --compilation-config '{written}'\n"
    spec = YAML(typ="safe").load(import_recipe(recipe, "r.yaml").spec_text)
    assert spec["engine"]["args"] == ["--compilation-config", meant]
