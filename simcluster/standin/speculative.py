"""Speculative decoding as the real engines judge it before they load anything: vLLM 0.32's
SpeculativeConfig (vllm/config/speculative.py, with EngineArgs.create_speculative_config merging
--spec-method/--spec-model/--spec-tokens) and SGLang 0.5.23's speculative_hook
(sglang/srt/arg_groups/speculative_hook.py). Pure functions of the flags and of a model's config.json,
so the simulated cluster's stand-in and the fast tests' fake docker refuse the same things."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any

MARKER = "SPARKC_STANDIN_SPECULATIVE"  # the resolved settings, one line in the engine's log
ReadConfig = Callable[[str], "dict[str, Any] | None"]  # a model folder -> its config.json, None: unreadable


class SpeculativeError(Exception):
    """Raised with the message the real engine prints."""


# vLLM's MTPModelTypes: each is read as "mtp", with a deprecation warning.
VLLM_MTP_NAMES = frozenset({
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp",
})  # fmt: skip
# vLLM's SpeculativeMethod.
VLLM_METHODS = frozenset({
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
    "extract_hidden_states", "dflash", "ngram_gpu", "dspark",
}) | VLLM_MTP_NAMES  # fmt: skip
# The fields of vLLM's SpeculativeConfig a user may set; pydantic refuses any other key.
VLLM_KEYS = frozenset({
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
    "tensor_parallel_size", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype", "max_model_len",
    "revision", "code_revision", "index_share_for_mtp_iteration", "disable_padded_drafter_batch",
    "disable_eagle_block_drop", "use_local_argmax_reduction", "use_heterogeneous_vocab", "prompt_lookup_max",
    "prompt_lookup_min", "parallel_drafting", "num_speculative_tokens_per_batch_size",
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob", "draft_load_config", "rejection_sample_method", "synthetic_acceptance_rates",
    "synthetic_acceptance_length", "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk",
    "speculative_token_tree",
})  # fmt: skip
# Keys of a config.json that count a model's MTP layers (vLLM's hf_config_override reads them as n_predict).
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")


def read_config(folder: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
            loaded = json.load(fh)
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def mtp_layers(config: dict[str, Any]) -> int | None:
    for section in (config, config.get("text_config")):
        for key in MTP_LAYER_KEYS if isinstance(section, dict) else ():
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _positive(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpeculativeError(f"{key}: Input should be greater than or equal to 1, got {value!r}")
    return value


def vllm(
    config: dict[str, Any] | None, shorthand: dict[str, Any], target: str, read: ReadConfig | None = read_config
) -> dict[str, Any] | None:
    """vLLM's speculative config as its engine resolves it (method, model, tokens), or None without one.
    read None: the folders cannot be seen (the fast tests' fake docker), so what they decide is not judged."""
    for flag, key in (
        ("--spec-method", "method"),
        ("--spec-model", "model"),
        ("--spec-tokens", "num_speculative_tokens"),
    ):
        if shorthand.get(key) is None:
            continue
        config = {} if config is None else dict(config)
        if key in config:
            raise SpeculativeError(f"{flag} and --speculative-config['{key}'] are mutually exclusive")
        config[key] = shorthand[key]
    if config is None:
        return None
    config = {k.replace("-", "_"): v for k, v in config.items()}
    unknown = sorted(set(config) - VLLM_KEYS)
    if unknown:
        raise SpeculativeError(f"Unexpected keyword argument(s) for SpeculativeConfig: {unknown}")
    method, model = config.get("method"), config.get("model")
    if method is not None and method not in VLLM_METHODS:
        raise SpeculativeError(f"method: Input should be one of {sorted(VLLM_METHODS)}, got {method!r}")
    tokens = config.get("num_speculative_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0):
        raise SpeculativeError(f"num_speculative_tokens: Input should be greater than 0, got {tokens!r}")
    if config.get("tensor_parallel_size") is not None:
        raise SpeculativeError(
            "'tensor_parallel_size' is not a valid argument in the speculative_config. "
            "Please pass 'draft_tensor_parallel_size' instead."
        )
    if method is None:
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if method in VLLM_MTP_NAMES:
        method = "mtp"
    if model is None and tokens is not None:
        if method == "mtp":
            model = target  # the draft from the model's own checkpoint
        elif method in ("ngram", "ngram_gpu", "suffix", "extract_hidden_states"):
            model = method
        elif method not in ("dspark", "custom_class"):
            raise SpeculativeError("num_speculative_tokens was provided but without speculative model.")
    if method in ("ngram", "ngram_gpu"):
        low, high = _positive(config, "prompt_lookup_min"), _positive(config, "prompt_lookup_max")
        low, high = (5, 5) if low is None and high is None else (low or high, high or low)
        if low > high:  # type: ignore[operator]
            raise SpeculativeError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}")
        config.update(prompt_lookup_min=low, prompt_lookup_max=high)
    elif method == "suffix":
        if importlib.util.find_spec("arctic_inference") is None:
            raise SpeculativeError(
                "Arctic Inference is required for suffix decoding. Install via `pip install arctic-inference==0.1.1`."
            )
        tokens = tokens or config.get("suffix_decoding_max_tree_depth", 24)
    elif model is not None and method not in ("custom_class", "extract_hidden_states") and read is not None:
        tokens = _draft(method, model, tokens, read)
    elif model is not None and read is None:
        return {**config, "method": method, "model": model, "num_speculative_tokens": tokens}
    if tokens is None:
        raise SpeculativeError(
            "num_speculative_tokens must be provided with speculative model unless the draft model config "
            "contains an n_predict parameter."
        )
    return {**config, "method": method, "model": model, "num_speculative_tokens": tokens}


def _draft(method: str, model: str, tokens: int | None, read: ReadConfig) -> int | None:
    """The draft's own config, as vLLM builds a ModelConfig of it (offline: a local folder or nothing)."""
    draft = read(model)
    if draft is None:
        raise SpeculativeError(f"the draft model {model!r} is not a local directory with a config.json")
    n_predict = draft.get("n_predict")
    if method == "dflash":
        _dflash_architectures(draft)
    if method == "mtp":
        n_predict = mtp_layers(draft) or (1 if str(draft.get("model_type", "")).endswith("_mtp") else None)
        if n_predict is None:  # hf_config_override maps no such model to an MTP draft
            raise SpeculativeError(f"Unsupported speculative method: '{method}'")
    if isinstance(n_predict, int) and n_predict > 0:
        if tokens is None:
            return n_predict
        if tokens > n_predict and tokens % n_predict != 0:
            raise SpeculativeError(f"num_speculative_tokens:{tokens} must be divisible by n_predict={n_predict}")
    if tokens is None:
        raise SpeculativeError("A speculative model was provided, but `num_speculative_tokens` was not provided")
    return tokens


# The DFlash draft architectures vLLM 0.32 registers (model_executor/models/registry.py).
DFLASH_ARCHITECTURES = frozenset({
    "DFlashDraftModel", "DFlash2DraftModel", "LiLiCorrDraftModel", "DFlashMuseGlimmerAssistantModel",
    "DFlashLagunaForCausalLM",
})  # fmt: skip


def _dflash_architectures(draft: dict[str, Any]) -> None:
    """vLLM reads a dflash draft's config as an EAGLEConfig, which names each architecture DFlash<arch> unless it
    starts or ends with DFlash already; the model registry must know every one."""
    named = [
        a if a.startswith("DFlash") or a.endswith("DFlash") or a == "LiLiCorrDraftModel" else f"DFlash{a}"
        for a in draft.get("architectures") or []
    ]
    if not named or any(a not in DFLASH_ARCHITECTURES for a in named):
        raise SpeculativeError(f"Model architectures {named} are not supported for now.")


# SGLang's SpeculativeAlgorithm names, and NEXTN, its alias of EAGLE.
SGLANG_ALGORITHMS = frozenset(
    {"DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN"}
)
# Models whose checkpoint carries the NEXTN layers, for which SGLang reads the draft from --model-path.
SGLANG_BUNDLED_MTP = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
    "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
})  # fmt: skip


def sglang(
    algorithm: str | None,
    draft_path: str | None,
    steps: int | None,
    topk: int | None,
    draft_tokens: int | None,
    model_path: str,
    read: ReadConfig | None = read_config,
) -> dict[str, Any] | None:
    """SGLang's speculative settings as handle_speculative_decoding resolves them, or None without any (read
    None: the folders cannot be seen, and the draft's is not judged)."""
    if algorithm is None:
        return None
    algorithm = algorithm.upper()
    if algorithm not in SGLANG_ALGORITHMS:
        raise SpeculativeError(f"Unknown speculative algorithm name: {algorithm}")
    if algorithm == "NEXTN":
        algorithm = "EAGLE"
    if algorithm == "NGRAM":
        topk = 10  # --speculative-ngram-max-bfs-breadth's default
        draft_tokens = draft_tokens or 12
        return {"algorithm": algorithm, "num_draft_tokens": draft_tokens, "num_steps": steps or draft_tokens // topk}
    if algorithm not in ("EAGLE", "EAGLE3", "STANDALONE"):
        raise SpeculativeError(f"{algorithm} speculative decoding is not supported by the stand-in")
    target = (read(model_path) if read else None) or {}
    architectures = target.get("architectures") or [""]
    if draft_path is None and architectures[0] in SGLANG_BUNDLED_MTP:
        draft_path = model_path
    if draft_path is None and algorithm == "EAGLE" and (mtp_layers(target) or read is None):
        draft_path = model_path  # NEXTN from the model's own MTP layers
    if draft_path is None:
        raise SpeculativeError(f"--speculative-draft-model-path is required for --speculative-algorithm {algorithm}")
    if read is not None and read(draft_path) is None:
        raise SpeculativeError(f"the draft model {draft_path!r} is not a local directory with a config.json")
    if steps is None:
        if topk is not None or draft_tokens is not None:  # SGLang asserts both unset before it chooses
            raise SpeculativeError(
                "AssertionError: speculative_eagle_topk and speculative_num_draft_tokens need --speculative-num-steps"
            )
        steps, topk, draft_tokens = (
            (5, 4, 8) if architectures[0] == "LlamaForCausalLM" and algorithm != "STANDALONE" else (3, 1, 4)
        )
    topk = topk or 1
    if topk == 1:
        draft_tokens = steps + 1  # "adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
    return {
        "algorithm": algorithm,
        "draft": draft_path,
        "num_steps": steps,
        "topk": topk,
        "num_draft_tokens": draft_tokens,
    }
