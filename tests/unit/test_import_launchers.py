"""`sparkc import` runs a recipe as its own launcher would: the executor that launcher really uses on several
nodes, sparkrun's pre_exec steps as pre_engine hooks, and vLLM's `--max-model-len auto` kept. Each recipe here
is written anew in the shape of a public one, its source named beside it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.pipeline import compile_text
from compiler.plan import flat
from compiler.resolve.context import derive
from compiler.spec.build import build_spec
from compiler.spec.schema import load_schema, with_defaults
from compiler.tools.importer import import_recipe
from tests.specs import compile_spec, diagnostics_text, example, with_changes

# After scitrera/sparkrun recipes/qwen3/qwen3-1.7b-vllm.yaml: runtime vllm, no word on Ray, here on two nodes.
SPARKRUN_VLLM = """\
model: Qwen/Qwen3-1.7B
runtime: vllm
container: scitrera/dgx-spark-vllm:0.16.0-t5
defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 2, gpu_memory_utilization: 0.3, served_model_name: qwen3-1.7b}
command: |
  vllm serve {model} --served-model-name {served_model_name} --gpu-memory-utilization {gpu_memory_utilization}
    -tp {tensor_parallel} --host {host} --port {port} --trust-remote-code
"""


def _spec(text: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    result = import_recipe(text, "recipe.yaml")
    assert result.errors == (), [str(w) for w in result.errors]
    return YAML(typ="safe").load(result.spec_text), tuple(map(str, result.warnings))


def _compiled_words(text: str) -> list[str]:
    """The head's engine command after import and compile, the placeholders filled as an operator would."""
    spec_text = import_recipe(text, "recipe.yaml").spec_text
    spec_text = spec_text.replace("- PLACEHOLDER\n", "- rocep1s0f1\n").replace("PLACEHOLDER", "filled-in")
    result = compile_text(spec_text, "spec.yaml", render_files=False)
    assert result.ok, diagnostics_text(result)
    given: Any = YAML(typ="safe").load(spec_text)
    d = derive(build_spec(with_defaults(given, load_schema()), given))
    return list(flat(d.engine.argv(d, 0).command))


def test_sparkruns_bare_vllm_runtime_runs_vllms_own_multi_node_mode() -> None:
    """sparkrun resolves `runtime: vllm` without a Ray hint to vllm-distributed (--nnodes), not Ray."""
    spec, _ = _spec(SPARKRUN_VLLM)
    assert spec["engine"]["backend"] == "native"
    words = _compiled_words(SPARKRUN_VLLM)
    assert "--nnodes" in words and "ray" not in words


@pytest.mark.parametrize(
    ("change", "backend"),
    [
        # sparkrun: `distributed_executor_backend: ray` in the defaults picks vllm-ray.
        (
            lambda r: r.replace(
                "served_model_name: qwen3-1.7b}", "served_model_name: qwen3-1.7b,\n  distributed_executor_backend: ray}"
            ),
            "ray",
        ),
        # The command's own flag: vLLM's multiprocessing executor is its native mode.
        (lambda r: r.replace("--trust-remote-code", "--trust-remote-code --distributed-executor-backend mp"), "native"),
        (lambda r: r.replace("runtime: vllm", "runtime: eugr-vllm"), "ray"),  # a vllm-ray with eugr's builds
    ],
)
def test_the_recipes_own_hints_pick_its_executor(change, backend: str) -> None:  # type: ignore[no-untyped-def]
    spec, _ = _spec(change(SPARKRUN_VLLM))
    assert spec["engine"]["backend"] == backend


def test_spark_vllm_dockers_own_recipe_runs_under_its_ray_cluster() -> None:
    """After eugr/spark-vllm-docker recipes (recipe_version 1, no runtime): its launch-cluster.sh always
    starts Ray in every container, so a command without --distributed-executor-backend still runs on Ray."""
    recipe = (
        'recipe_version: "1"\nname: Demo\nmodel: org/demo\ncontainer: vllm-node\n'
        "defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 2}\n"
        "command: vllm serve org/demo --port {port} --host {host} -tp {tensor_parallel}\n"
    )
    spec, _ = _spec(recipe)
    assert spec["engine"]["backend"] == "ray"


# After eugr/spark-vllm-docker's recipes and launch-cluster.sh, whose `docker run -v` words go through a shell on
# each node (so ~ there is the ssh user's home): the Hugging Face cache and a models folder under ~/.
EUGR_HOME_VOLUMES = (
    'recipe_version: "1"\nname: Demo\nmodel: org/demo\ncontainer: vllm-node\n'
    "defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 2}\n"
    "volumes:\n  - ~/.cache/huggingface:/root/.cache/huggingface\n  - ~/models:/models:ro\n"
    "command: vllm serve org/demo --port {port} --host {host} -tp {tensor_parallel}\n"
)


def test_a_spark_vllm_docker_recipes_home_volumes_stay_under_home() -> None:
    spec, warnings = _spec(EUGR_HOME_VOLUMES)
    assert spec["container"]["mounts"] == [
        {"host": "~/.cache/huggingface", "container": "/root/.cache/huggingface", "readonly": False},
        {"host": "~/models", "container": "/models", "readonly": True},
    ]
    assert not any(w.startswith("volumes") for w in warnings), warnings


def test_a_single_node_recipe_names_no_backend() -> None:
    spec, _ = _spec(SPARKRUN_VLLM.replace("tensor_parallel: 2", "tensor_parallel: 1"))
    assert "backend" not in spec["engine"]


# After the sparkrun recipes with `max_model_len: auto` (sparkrun's vLLM runtimes pass it on as
# --max-model-len auto: vLLM then fits the context to the KV cache it has at start).
def test_max_model_len_auto_reaches_vllm_as_auto() -> None:
    recipe = SPARKRUN_VLLM.replace(
        "served_model_name: qwen3-1.7b}", "served_model_name: qwen3-1.7b,\n  max_model_len: auto}"
    )
    recipe = recipe.replace("--trust-remote-code", "--trust-remote-code --max-model-len {max_model_len}")
    spec, warnings = _spec(recipe)
    assert spec["engine"]["max_model_len"] == "auto" and not any("max_model_len" in w for w in warnings)
    words = _compiled_words(recipe)
    assert words[words.index("--max-model-len") + 1] == "auto"


def test_max_model_len_auto_is_refused_where_the_engine_takes_only_a_number() -> None:
    spec = with_changes(example("sglang-qwen3-30b-2spark"), {"engine.max_model_len": "auto"})
    result = compile_spec(spec)
    assert not result.ok
    assert "engine.max_model_len: 'auto': SGLang takes its context length only as a number" in diagnostics_text(result)


# After sparkrun's RECIPES.md (pre_exec) and the registry recipes that fetch an NCCL build before vLLM starts:
# a shell step run by bash in every container, `{key}` filled from the defaults, and VLLM_NCCL_SO_PATH
# naming the library it wrote.
PRE_EXEC = """\
model: Qwen/Qwen3-1.7B
runtime: vllm
container: scitrera/dgx-spark-vllm:0.16.0-t5
defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 2, nccl_version: 2.30.7}
env: {VLLM_NCCL_SO_PATH: /workspace/nccl/libnccl.so.2}
pre_exec:
  - "mkdir -p /workspace/nccl && cd /workspace/nccl && curl -fsSL -o libnccl.so.2 https://example.invalid/nccl-{nccl_version}/libnccl.so.2"
command: vllm serve {model} -tp {tensor_parallel} --host {host} --port {port}
"""


def test_pre_exec_steps_become_pre_engine_hooks_that_run_in_bash() -> None:
    spec, warnings = _spec(PRE_EXEC)
    [hook] = spec["container"]["hooks"]["pre_engine"]
    assert shlex.split(hook)[:2] == ["bash", "-c"] and "nccl-2.30.7/libnccl.so.2" in hook
    assert spec["container"]["env"]["VLLM_NCCL_SO_PATH"] == "/workspace/nccl/libnccl.so.2"
    assert not any("nccl_version" in w for w in warnings)  # the step uses it


def test_a_pre_exec_hook_writes_the_library_that_vllm_nccl_so_path_names(tmp_path: Path) -> None:
    """The hook as the container's sh runs it, /workspace under a temporary root and a stand-in curl."""
    spec, _ = _spec(PRE_EXEC)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text('#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\necho nccl > "$2"\n')
    (bin_dir / "curl").chmod(0o755)
    workspace = tmp_path / "workspace"
    hook = spec["container"]["hooks"]["pre_engine"][0].replace("/workspace", str(workspace))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", hook], check=True, env=env, cwd=tmp_path)
    library = spec["container"]["env"]["VLLM_NCCL_SO_PATH"].replace("/workspace", str(workspace))
    assert Path(library).read_text() == "nccl\n"


def test_the_imported_pre_exec_compiles_into_the_launch() -> None:
    spec_text = import_recipe(PRE_EXEC, "recipe.yaml").spec_text
    spec_text = spec_text.replace("- PLACEHOLDER\n", "- rocep1s0f1\n").replace("PLACEHOLDER", "filled-in")
    result = compile_text(spec_text, "spec.yaml", render_files=False)
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None and result.plan.hooks is not None
    assert "nccl-2.30.7" in result.plan.hooks.pre_engine[0]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("- copy: /home/me/patches\n    dest: /workspace/patches", "copies '/home/me/patches' from the machine"),
        ('- "pip install {wheel}"', "{wheel}: the recipe's defaults give no value"),
    ],
)
def test_a_pre_exec_step_that_cannot_be_carried_is_refused_with_the_fix(entry: str, message: str) -> None:
    recipe = PRE_EXEC.split("pre_exec:")[0] + "pre_exec:\n  " + entry + "\ncommand: vllm serve {model}\n"
    result = import_recipe(recipe, "recipe.yaml")
    assert any(message in w.message and w.key == "pre_exec.0" for w in result.errors), [str(w) for w in result.warnings]


# After eugr/spark-vllm-docker recipes/gemma4-26b-a4b-fp8-speculative.yaml (tests/recipes/public has it whole):
# its MTP draft named by Hugging Face id, here without the moe_backend key that model.draft cannot hold.
DRAFT_BY_ID = """\
recipe_version: "1"
name: Gemma4-26B-A4B-FP8-Speculative
model: google/gemma-4-26B-A4B-it
container: vllm-node
defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 2, gpu_memory_utilization: 0.8}
command: |
  vllm serve google/gemma-4-26B-A4B-it --gpu-memory-utilization {gpu_memory_utilization} --port {port}
    --host {host} -tp {tensor_parallel} --distributed-executor-backend ray
    --speculative-config '{{"method":"mtp","model":"google/gemma-4-26B-A4B-it-assistant","num_speculative_tokens":4}}'
"""


def test_a_draft_named_by_its_hugging_face_id_is_fetched_beside_the_model() -> None:
    spec, _ = _spec(DRAFT_BY_ID)
    assert spec["model"]["draft"]["repo"] == "google/gemma-4-26B-A4B-it-assistant"
    spec_text = import_recipe(DRAFT_BY_ID, "recipe.yaml").spec_text
    spec_text = spec_text.replace("- PLACEHOLDER\n", "- rocep1s0f1\n").replace("PLACEHOLDER", "filled-in")
    result = compile_text(spec_text, "spec.yaml", render_files=False)
    assert result.ok, diagnostics_text(result)
    fetch = result.plan.fetch if result.plan is not None else None
    assert fetch is not None and fetch.draft_repo == "google/gemma-4-26B-A4B-it-assistant"
    assert fetch.draft_target == "/filled-in/models/gemma-4-26B-A4B-it-assistant"
    words = _compiled_words(DRAFT_BY_ID)
    config = words[words.index("--speculative-config") + 1]
    assert '"model": "/filled-in/models/gemma-4-26B-A4B-it-assistant"' in config.replace('":"', '": "')


# After the sparkrun registry recipes that mount the operator's caches as `~/.cache/...:/root/.cache/...`:
# the launcher's remote shell expands ~ to the ssh user's home on each node, and so does sparkc's launcher.
def test_a_volume_under_home_is_carried_as_the_recipe_wrote_it() -> None:
    recipe = SPARKRUN_VLLM + "volumes:\n  - ~/.cache/flashinfer:/root/.cache/flashinfer\n"
    spec, warnings = _spec(recipe)
    [mount] = spec["container"]["mounts"]
    assert mount == {"host": "~/.cache/flashinfer", "container": "/root/.cache/flashinfer", "readonly": False}
    assert not any("flashinfer" in w for w in warnings), warnings
    spec_text = import_recipe(recipe, "recipe.yaml").spec_text
    assert "~/ is the ssh user's home on each node" in spec_text
    result = compile_text(
        spec_text.replace("- PLACEHOLDER\n", "- rocep1s0f1\n").replace("PLACEHOLDER", "filled-in"),
        "spec.yaml",
        render_files=False,
    )
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    assert ("-v", "~/.cache/flashinfer:/root/.cache/flashinfer") in result.plan.nodes[1].docker_run
