"""`sparkc import` on the shapes public recipes take, where a measurement on them found the import wrong: each
recipe here is written anew with the same fields and flags as the public one named beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.tools.importer import import_recipe

# After spark-arena/community-recipe-registry recipes/qwen3.8-flash-next/t4cmyk/
# qwen3.8-flash-next-nvfp4-yarn-vllm-t4cmyk.yaml: a default whose key holds a hyphen, used as {hf-overrides}.
YARN_BY_HYPHENATED_KEY = """\
model: RadixArk/Qwen3.8-Flash-Next-NVFP4
runtime: vllm-distributed
container: vllm/vllm-openai:qwen38-flash-next
defaults:
  tensor_parallel: 2
  max_model_len: 1000000
  hf-overrides: '{"rope_parameters":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":262144}}'
command: |
  vllm serve {model} -tp {tensor_parallel} --max-model-len {max_model_len} \\
      --hf-overrides '{hf-overrides}' --enable-chunked-prefill
"""


def _imported(text: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    result = import_recipe(text, "recipe.yaml")
    assert result.errors == (), [str(e) for e in result.errors]
    return YAML(typ="safe").load(result.spec_text), tuple(map(str, result.warnings))


def test_a_default_whose_key_holds_a_hyphen_is_filled_as_sparkrun_fills_it() -> None:
    spec, warnings = _imported(YARN_BY_HYPHENATED_KEY)
    overrides = '{"rope_parameters":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":262144}}'
    assert spec["engine"]["args"] == ["--hf-overrides", overrides, "--enable-chunked-prefill"]
    assert spec["engine"]["max_model_len"] == 1000000
    assert not [w for w in warnings if "hf-overrides" in w]


def test_a_hyphenated_placeholder_without_a_value_drops_its_flag_with_a_warning() -> None:
    spec, warnings = _imported(YARN_BY_HYPHENATED_KEY.replace("  hf-overrides:", "  hf_overrides:"))
    assert spec["engine"]["args"] == ["--enable-chunked-prefill"]
    assert any(
        "--hf-overrides {hf-overrides}: the recipe's defaults give {hf-overrides} no value" in w for w in warnings
    )


# After spark-arena/community-recipe-registry recipes/deepseek-v4-flash-vision-exp/anemll-robot/
# deepseek-v4-flash-vision-exp-fp8-dspark-sglang-anemll-robot.yaml: sparkrun names the mod by its folder under
# the registry's mods/, without the `mods/` that spark-vllm-docker's recipes write.
SGLANG_WITH_A_BARE_MOD = """\
recipe_version: "2"
model: deepseek-ai/DeepSeek-V4-Flash-Vision-Exp
runtime: sglang
container: lmsysorg/sglang:dev-v4f-2dgx-v2
min_nodes: 2
defaults: {tensor_parallel: 2, served_model_name: DeepSeek-V4-Flash-Vision-Exp}
mods:
  - stream-vl-load-weights
command: |
  sglang serve --trust-remote-code --model-path {model} --served-model-name {served_model_name} \\
    --tp {tensor_parallel} --weight-loader-drop-cache-after-load
"""


@pytest.mark.parametrize("named", ["stream-vl-load-weights", "mods/stream-vl-load-weights"])
def test_a_mod_named_without_mods_is_read_from_the_repositorys_mods_folder_as_sparkrun_does(
    tmp_path: Path, named: str
) -> None:
    (tmp_path / "mods" / "stream-vl-load-weights").mkdir(parents=True)
    (tmp_path / "mods" / "stream-vl-load-weights" / "run.sh").write_text("#!/bin/bash\ncp overlay.py /x\n")
    text = SGLANG_WITH_A_BARE_MOD.replace("  - stream-vl-load-weights", f"  - {named}")
    result = import_recipe(text, "recipe.yaml", tmp_path, "spec-mods")
    assert result.errors == (), [str(e) for e in result.errors]
    hooks = YAML(typ="safe").load(result.spec_text)["container"]["hooks"]
    assert hooks["patches"] == "spec-mods" and "cd /workspace/mods/stream-vl-load-weights" in hooks["pre_engine"][0]
    assert set(result.files) == {"spec-mods/stream-vl-load-weights/run.sh"}


def test_a_mod_in_neither_place_is_still_refused(tmp_path: Path) -> None:
    result = import_recipe(SGLANG_WITH_A_BARE_MOD, "recipe.yaml", tmp_path, "spec-mods")
    assert [e.key for e in result.errors] == ["mods.0"]
    assert "the mod mods/stream-vl-load-weights does not exist in that repository" in str(result.errors[0])


# After spark-arena/recipe-registry experimental-recipes/minimax-m3/minimax-m3-v0-nvfp4-4x.yaml: a flag the
# newest SGLang table no longer has (--cuda-graph-bs, now split in -decode and -prefill), given several values.
SGLANG_WITH_A_FLAG_OF_AN_OLDER_RELEASE = """\
recipe_version: "2"
model: sparkarena/Minimax-M3-v0-NVFP4
runtime: sglang
container: scitrera/dgx-spark-sglang-mm:v0
min_nodes: 4
defaults: {tensor_parallel: 4, cuda_graph_max_bs: 16, cuda_graph_bs: "1 2 4 8 12 16"}
command: |
  sglang serve --model-path {model} --tp {tensor_parallel} --trust-remote-code \\
    --cuda-graph-max-bs {cuda_graph_max_bs} --cuda-graph-bs {cuda_graph_bs} --enable-metrics
"""


def test_the_values_of_a_flag_the_table_does_not_know_stay_with_it() -> None:
    spec, warnings = _imported(SGLANG_WITH_A_FLAG_OF_AN_OLDER_RELEASE)
    assert spec["engine"]["args"] == [
        "--cuda-graph-max-bs", "16", "--cuda-graph-bs", "1", "2", "4", "8", "12", "16", "--enable-metrics",
    ]  # fmt: skip
    assert not [w for w in warnings if "follows no flag" in w]


def test_a_word_after_a_known_flag_that_takes_none_is_still_left_out_with_a_warning() -> None:
    recipe = SGLANG_WITH_A_FLAG_OF_AN_OLDER_RELEASE.replace("--enable-metrics", "--enable-metrics 7")
    spec, warnings = _imported(recipe)
    assert spec["engine"]["args"][-1] == "--enable-metrics"
    assert "command: '7' follows no flag that takes it; left out" in warnings


# After eugr/spark-vllm-docker recipes/nemotron-3-super-nvfp4-mtp.yaml: a JSON value kept in the defaults and
# named as one {key} "because run-recipe.py does single-pass str.format()"; here one that nests an object, beside
# a JSON the command writes with the format string's {{ }} escapes.
EUGR_JSON_IN_DEFAULTS = """\
recipe_version: "1"
model: nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4
container: vllm-node
defaults:
  tensor_parallel: 2
  compilation_config: '{"level": 3, "pass_config": {"fuse_allreduce_rms": true}}'
command: |
  vllm serve nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4 \\
  --compilation-config '{compilation_config}' \\
  --override-generation-config '{{"temperature": 0.6, "top_p": 0.95}}' \\
  --tensor-parallel-size {tensor_parallel}
"""


def test_a_filled_value_keeps_its_braces_where_the_format_strings_escapes_are_undone() -> None:
    spec, warnings = _imported(EUGR_JSON_IN_DEFAULTS)
    assert spec["engine"]["args"] == [
        "--compilation-config",
        '{"level": 3, "pass_config": {"fuse_allreduce_rms": true}}',
        "--override-generation-config",
        '{"temperature": 0.6, "top_p": 0.95}',
    ]
    assert spec["engine"]["tensor_parallel"] == 2 and warnings == ()


# After spark-arena/community-recipe-registry recipes/qwen3.8-flash-next/thupalo/
# qwen3.8-flash-next-nvfp4-nextn-sglang-thupalo.yaml: the weights pinned to the snapshot the recipe was measured on.
PINNED = """\
recipe_version: "2"
model: RadixArk/Qwen3.8-Flash-Next-NVFP4
model_revision: 7b719225242aacd3dbd3f9407468c2ee9a9d2594
runtime: sglang
container: lmsysorg/sglang:qwen38flashnext
min_nodes: 2
defaults: {tensor_parallel: 2}
command: python3 -m sglang.launch_server --model-path {model} --tp-size {tensor_parallel} --page-size 64
"""


def test_a_pinned_snapshot_becomes_the_models_revision() -> None:
    spec, warnings = _imported(PINNED)
    assert spec["model"]["revision"] == "7b719225242aacd3dbd3f9407468c2ee9a9d2594"
    assert not [w for w in warnings if "model_revision" in w]


def test_a_revision_that_is_no_text_is_named_not_guessed() -> None:
    spec, warnings = _imported(PINNED.replace("7b719225242aacd3dbd3f9407468c2ee9a9d2594", "[a, b]"))
    assert "revision" not in spec["model"]
    assert "model_revision: a list, not a commit id, branch or tag; set model.revision by hand" in warnings


@pytest.mark.parametrize(
    ("executor", "entrypoint", "named"),
    [
        # spark-arena/community-recipe-registry .../qwen3.8-flash-next-nvfp4-vllm-t4cmyk.yaml: the image's
        # ENTRYPOINT is `vllm serve`, cleared so that the recipe's command runs in its place.
        ('{entrypoint: ""}', "bypass", []),
        # .../deepseek-v4-flash-vision-exp-fp8-dspark-sglang-anemll-robot.yaml: a larger /dev/shm, which the
        # host's already is (sparkc's containers share the host's IPC namespace).
        ("{shm_size: 32gb}", None, []),
        # spark-arena/recipe-registry experimental-recipes/minimax-m3/*.yaml: run as root.
        ("{user: root}", None, ["executor_config.user: not mapped; sparkc has no equivalent (review it by hand)"]),
    ],
)
def test_sparkruns_executor_config_as_the_spec_can_say_it(
    executor: str, entrypoint: str | None, named: list[str]
) -> None:
    spec, warnings = _imported(PINNED + f"executor_config: {executor}\n")
    assert spec["container"].get("entrypoint") == entrypoint
    assert [w for w in warnings if w.startswith("executor_config")] == named


# After spark-arena/recipe-registry experimental-recipes/qwen3.6/vllm-dflash/qwen3.6-27b-fp8-dflash-vllm.yaml
# (its mods left out): a DFlash draft named by its Hugging Face id, in a default filled into the command.
QWEN36_DFLASH = """\
recipe_version: "2"
model: Qwen/Qwen3.6-27B-FP8
runtime: vllm
container: ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 1
  pipeline_parallel: 1
  gpu_memory_utilization: 0.8
  max_model_len: 262144
  max_num_batched_tokens: 32768
  load_format: fastsafetensors
  kv_cache_dtype: auto
  attention_backend: flash_attn
  speculative_config: '{"method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15}'
command: |
  vllm serve {model} \\
    --host {host} \\
    --port {port} \\
    --max-model-len {max_model_len} \\
    --max-num-batched-tokens {max_num_batched_tokens} \\
    --gpu-memory-utilization {gpu_memory_utilization} \\
    --kv-cache-dtype {kv_cache_dtype} \\
    --load-format {load_format} \\
    --attention-backend {attention_backend} \\
    --speculative-config '{speculative_config}' \\
    -tp {tensor_parallel} \\
    -pp {pipeline_parallel}
"""

# After eugr/spark-vllm-docker recipes/laguna-s-2.1-nvfp4-dflash.yaml: the JSON written in the command itself,
# its braces doubled for str.format, the keys in another order.
LAGUNA_DFLASH = """\
recipe_version: "1"
name: Laguna-S-2.1-NVFP4-DFlash
model: poolside/Laguna-S-2.1-NVFP4
container: vllm-node
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 1
  max_num_seqs: 4
command: |
  vllm serve poolside/Laguna-S-2.1-NVFP4 \\
    --host {host} \\
    --port {port} \\
    --tensor-parallel-size {tensor_parallel} \\
    --max-num-seqs {max_num_seqs} \\
    --speculative-config '{{"model":"poolside/Laguna-S-2.1-DFlash-NVFP4","""  # one line in the recipe
LAGUNA_DFLASH += """"num_speculative_tokens":15,"method":"dflash"}}'
"""


@pytest.mark.parametrize(
    ("recipe", "repo"),
    [(QWEN36_DFLASH, "z-lab/Qwen3.6-27B-DFlash"), (LAGUNA_DFLASH, "poolside/Laguna-S-2.1-DFlash-NVFP4")],
    ids=["defaults", "inline"],
)
def test_a_dflash_draft_by_its_hugging_face_id_is_a_draft_fetched_beside_the_model(recipe: str, repo: str) -> None:
    spec, warnings = _imported(recipe)
    folder = repo.rsplit("/", 1)[1]
    draft = {"method": "dflash", "path": f"/PLACEHOLDER/models/{folder}", "repo": repo, "num_speculative_tokens": 15}
    assert spec["model"]["draft"] == draft
    assert not any(w.startswith("--spec") for w in spec["engine"].get("args", []))
    assert any(f"the draft {repo} is named by its Hugging Face id" in w for w in warnings)


# After spark-arena/community-recipe-registry recipes/glm53-exl3-dflash2-vllm.yaml: the DFlash config carries
# keys model.draft has no field for (the draft's own revision, sampling, tensor parallelism).
GLM53_DFLASH_KEYS = (
    '{"method":"dflash","model":"incoai/GLM-5.3-Flash-DFlash2","num_speculative_tokens":7,"kv_cache_dtype":"auto",'
    '"draft_sample_method":"probabilistic","rejection_sample_method":"standard","draft_tensor_parallel_size":1,'
    '"revision":"bf582e4eacc1810f76656d1811693ff6c6737d2a"}'
)


def test_a_dflash_config_with_keys_the_spec_cannot_hold_is_refused_naming_them() -> None:
    recipe = QWEN36_DFLASH.replace(
        """'{"method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15}'""",
        f"'{GLM53_DFLASH_KEYS}'",
    )
    result = import_recipe(recipe, "recipe.yaml")
    (refusal,) = [w.message for w in result.warnings if w.error]
    assert "names the draft incoai/GLM-5.3-Flash-DFlash2 by its Hugging Face id" in refusal
    named = "draft_sample_method, draft_tensor_parallel_size, kv_cache_dtype, rejection_sample_method, revision"
    assert f"keys model.draft cannot hold ({named})" in refusal
