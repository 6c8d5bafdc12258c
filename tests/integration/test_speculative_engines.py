"""Three judges of one speculative config: sparkc's compile, vLLM 0.32's own SpeculativeConfig (the CPU build
simcluster/install_vllm.sh installs, on tiny model configs) and the simulated cluster's stand-in
(simcluster/standin/speculative.py). Each case must get the same verdict from all three, and the
stand-in the engine's own message: what vLLM refuses, sparkc refuses at compile time and the stand-in at
start."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from compiler.diagnostics import Severity
from simcluster.standin import speculative
from simcluster.vllm_cpu import VLLM_VENV, vllm_available
from tests.product import needs
from tests.specs import compile_spec, example, with_changes

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
    "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
    "max_position_embeddings": 512, "torch_dtype": "float32",
}  # fmt: skip
# DeepSeek V3 in miniature: vLLM maps it to an MTP draft from its own num_nextn_predict_layers.
DEEPSEEK = {
    **LLAMA, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "torch_dtype": "bfloat16",
    "moe_intermediate_size": 64, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "kv_lora_rank": 32, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "num_nextn_predict_layers": 1,
}  # fmt: skip
# A DFlash draft in miniature, as z-lab's drafts describe themselves (vLLM registers DFlashDraftModel).
DFLASH = {
    **LLAMA, "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "head_dim": 64, "block_size": 4,
    "dflash_config": {"target_layer_ids": [0, 1], "mask_token_id": 999},
}  # fmt: skip
MODELS = {"llama": LLAMA, "mtp1": DEEPSEEK, "mtp2": {**DEEPSEEK, "num_nextn_predict_layers": 2}}

# (model, model.draft with "DRAFT" or "DFLASH" for the draft's folder, whether vLLM takes it)
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("llama", {"method": "ngram", "num_speculative_tokens": 3}, True),
    ("llama", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 5}, True),
    ("llama", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}, True),
    ("llama", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}, False),
    ("llama", {"method": "ngram"}, False),
    ("llama", {"method": "ngram_gpu", "num_speculative_tokens": 4}, True),
    ("llama", {"method": "draft_model", "path": "DRAFT", "num_speculative_tokens": 2}, True),
    ("llama", {"method": "draft_model", "path": "DRAFT"}, False),
    ("llama", {"method": "draft_model", "num_speculative_tokens": 2}, False),
    ("llama", {"method": "eagle", "num_speculative_tokens": 2}, False),
    ("llama", {"method": "mtp", "num_speculative_tokens": 1}, False),
    ("mtp1", {"method": "mtp", "num_speculative_tokens": 1}, True),
    ("mtp1", {"method": "mtp", "num_speculative_tokens": 3}, True),
    ("mtp1", {"method": "mtp"}, False),
    ("mtp2", {"method": "mtp", "num_speculative_tokens": 3}, False),
    ("mtp2", {"method": "mtp", "num_speculative_tokens": 4}, True),
    ("llama", {"method": "dflash", "path": "DFLASH", "num_speculative_tokens": 3}, True),
    ("llama", {"method": "dflash", "path": "DFLASH"}, False),
    ("llama", {"method": "dflash", "num_speculative_tokens": 3}, False),
]

# vLLM in a subprocess: one import (~20 s) for every case; each line of stdin a [config, target] pair.
JUDGE = """
import json, sys
from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
verdicts = []
for config, target, tokenizer in json.loads(sys.stdin.read()):
    try:
        model = ModelConfig(model=target, tokenizer=tokenizer, skip_tokenizer_init=True)
        SpeculativeConfig(**config, target_model_config=model, target_parallel_config=ParallelConfig())
        verdicts.append(None)
    except Exception as exc:
        verdicts.append(f"{type(exc).__name__}: {exc}")
print("VERDICTS " + json.dumps(verdicts))
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("speculative")
    found = {}
    for name, config in {**MODELS, "draft": LLAMA, "dflash": DFLASH}.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
        found[name] = str(root / name)
    return found


def engine_config(draft: dict[str, Any], folders: dict[str, str]) -> dict[str, Any]:
    """The config as a user would hand it to vLLM (the draft's folder seen at its own path)."""
    config = {("model" if k == "path" else k): v for k, v in draft.items()}
    return {k: _folder(v, folders) for k, v in config.items()}


def _folder(value: Any, folders: dict[str, str]) -> Any:
    return (
        {"DRAFT": folders["draft"], "DFLASH": folders["dflash"]}.get(value, value) if isinstance(value, str) else value
    )


SUFFIX = {"method": "suffix"}


@pytest.fixture(scope="module")
def vllm_verdicts(folders: dict[str, str]) -> list[str | None]:
    """vLLM's verdict on each case, then on SUFFIX."""
    needs(not vllm_available(), f"vLLM's CPU build in {VLLM_VENV} (bash simcluster/install_vllm.sh)")
    configs = [(engine_config(draft, folders), folders[model], folders["llama"]) for model, draft, _ in CASES]
    done = subprocess.run(
        [str(VLLM_VENV / "bin" / "python3"), "-c", JUDGE],
        input=json.dumps([*configs, (SUFFIX, folders["llama"], folders["llama"])]),
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("VERDICTS "))
    verdicts: list[str | None] = json.loads(line.split(" ", 1)[1])
    return verdicts


def sparkc_errors(model: str, draft: dict[str, Any], folders: dict[str, str]) -> list[str]:
    draft = {k: _folder(v, folders) for k, v in draft.items()}
    # the test models have 512 positions: a longer context is its own refusal, not the speculative one here
    changes = {"model.path": folders[model], "model.draft": draft, "engine.max_model_len": 512}
    spec = with_changes(example("solo-qwen3-32b"), changes)
    result = compile_spec(spec)
    return [d.message for d in result.diagnostics if d.severity is Severity.ERROR]


def test_sparkc_vllm_and_the_standin_agree_on_every_case(
    folders: dict[str, str], vllm_verdicts: list[str | None]
) -> None:
    for (model, draft, takes), verdict in zip(CASES, vllm_verdicts[:-1], strict=True):
        config, target = engine_config(draft, folders), folders[model]
        label = f"{model} {draft}"
        assert (verdict is None) is takes, f"{label}: vLLM says {verdict}"
        assert (not sparkc_errors(model, draft, folders)) is takes, f"{label}: {sparkc_errors(model, draft, folders)}"
        try:
            speculative.vllm(config, {}, target)
            standin = None
        except speculative.SpeculativeError as exc:
            standin = str(exc)
        assert (standin is None) is takes, f"{label}: the stand-in says {standin}"
        assert standin is None or (verdict is not None and standin in verdict), (label, standin, verdict)


def test_suffix_needs_arctic_inference_in_the_image_on_both(
    folders: dict[str, str], vllm_verdicts: list[str | None]
) -> None:
    """sparkc cannot see into the image; vLLM and the stand-in refuse alike where the package is missing."""
    assert not sparkc_errors("llama", SUFFIX, folders)
    verdict = vllm_verdicts[-1]
    with pytest.raises(speculative.SpeculativeError) as refused:
        speculative.vllm(SUFFIX, {}, folders["llama"])
    assert verdict is not None and str(refused.value) in verdict


def test_the_shorthand_flags_merge_into_the_config_as_vllm_merges_them(folders: dict[str, str]) -> None:
    merged = speculative.vllm(None, {"method": "ngram", "num_speculative_tokens": 3}, folders["llama"])
    assert merged is not None and (merged["method"], merged["num_speculative_tokens"]) == ("ngram", 3)
    with pytest.raises(speculative.SpeculativeError, match=r"--spec-tokens and --speculative-config\['num_spec"):
        speculative.vllm({"method": "ngram", "num_speculative_tokens": 2}, {"num_speculative_tokens": 3}, "/m")


def test_a_dflash_draft_must_be_an_architecture_vllm_registers_for_it(folders: dict[str, str]) -> None:
    """vLLM names the draft's architecture DFlash<arch> and looks it up; a plain model is no DFlash draft."""
    config = {"method": "dflash", "model": folders["draft"], "num_speculative_tokens": 3}
    with pytest.raises(speculative.SpeculativeError, match=r"\['DFlashLlamaForCausalLM'\] are not supported"):
        speculative.vllm(config, {}, folders["llama"])
    resolved = speculative.vllm({**config, "model": folders["dflash"]}, {}, folders["llama"])
    assert resolved is not None and (resolved["method"], resolved["num_speculative_tokens"]) == ("dflash", 3)
