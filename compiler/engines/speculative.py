"""The speculative methods (model.draft.method): which engine has each, under which name, and what each
needs. Data the engines' flags and the compile-time rules both read, so they never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from compiler.engines.flag_table import FlagTable, tables
from compiler.spec.typed import Draft, DraftMethod, EngineKind


class Weights(StrEnum):
    REQUIRED = "required"  # its own checkpoint, mounted read-only
    OPTIONAL = "optional"  # the model's own layers, or a separate checkpoint where one is given
    NONE = "none"  # proposes from the text itself: nothing to mount


@dataclass(frozen=True)
class Method:
    weights: Weights
    names: Mapping[EngineKind, str]  # the engine's own name for it; an engine absent here lacks it
    # Engines that need num_speculative_tokens for it (the others have a default of their own).
    needs_tokens: frozenset[EngineKind]
    what: str  # for explain and PLAN.md
    # Engines that read prompt_lookup_min/max for it: vLLM's n-gram proposers (zeroed for the others).
    window: frozenset[EngineKind] = frozenset()
    # Engines that run the model's MTP layers again for more tokens than it has, so the count must be a
    # multiple of them (vLLM SpeculativeConfig.__post_init__: "must be divisible by n_predict").
    layer_multiple: frozenset[EngineKind] = frozenset()
    # Engines whose older releases may lack it: checked against the method list of the release's flag table
    # (vLLM's --spec-method choices), and warned about where that table has none.
    recent: frozenset[EngineKind] = frozenset()
    # Engines that have it but whose settings sparkc does not write, with why (refused at model.draft.method).
    not_carried: Mapping[EngineKind, str] = field(default_factory=dict)


VLLM, SGLANG = EngineKind.VLLM, EngineKind.SGLANG

# vLLM: vllm/config/speculative.py, SpeculativeMethod. SGLang: sglang/srt/speculative/spec_info.py,
# SpeculativeAlgorithm (NEXTN is its alias of EAGLE for a model's own MTP layers).
# needs_tokens mirrors vLLM's SpeculativeConfig._verify_args: "num_speculative_tokens must be provided ...
# unless the draft model config contains an n_predict parameter" (Medusa and MLP-speculator configs
# do), and _validate_suffix_decoding, which defaults it to the suffix tree's depth. SGLang chooses
# steps itself when none are given (_auto_choose_speculative_params; NGRAM: 12 draft tokens).
METHODS: dict[DraftMethod, Method] = {
    DraftMethod.DRAFT_MODEL: Method(
        Weights.REQUIRED, {VLLM: "draft_model", SGLANG: "STANDALONE"}, frozenset({VLLM}), "a smaller draft model"
    ),
    DraftMethod.EAGLE: Method(Weights.REQUIRED, {VLLM: "eagle", SGLANG: "EAGLE"}, frozenset({VLLM}), "an EAGLE head"),
    DraftMethod.EAGLE3: Method(
        Weights.REQUIRED, {VLLM: "eagle3", SGLANG: "EAGLE3"}, frozenset({VLLM}), "an EAGLE-3 head"
    ),
    # vLLM: vllm/v1/spec_decode/dflash.py (DFlashProposer); the draft reads the target's hidden states.
    DraftMethod.DFLASH: Method(
        Weights.REQUIRED,
        {VLLM: "dflash"},
        frozenset({VLLM}),
        "a DFlash block-diffusion draft",
        recent=frozenset({VLLM}),
        not_carried={
            SGLANG: "SGLang's DFLASH counts its draft block in its own way (--speculative-num-draft-tokens), which "
            "sparkc does not write yet"
        },
    ),
    DraftMethod.MEDUSA: Method(Weights.REQUIRED, {VLLM: "medusa"}, frozenset(), "Medusa heads"),
    DraftMethod.MLP_SPECULATOR: Method(Weights.REQUIRED, {VLLM: "mlp_speculator"}, frozenset(), "an MLP speculator"),
    DraftMethod.MTP: Method(
        Weights.OPTIONAL,
        {VLLM: "mtp", SGLANG: "NEXTN"},
        frozenset({VLLM}),
        "the model's own MTP layers",
        layer_multiple=frozenset({VLLM}),
    ),
    DraftMethod.NGRAM: Method(
        Weights.NONE,
        {VLLM: "ngram", SGLANG: "NGRAM"},
        frozenset({VLLM}),
        "n-grams looked up in the prompt",
        window=frozenset({VLLM}),
    ),
    DraftMethod.NGRAM_GPU: Method(
        Weights.NONE,
        {VLLM: "ngram_gpu"},
        frozenset({VLLM}),
        "n-grams looked up in the prompt, on the GPU",
        window=frozenset({VLLM}),
    ),
    DraftMethod.SUFFIX: Method(
        Weights.NONE, {VLLM: "suffix"}, frozenset(), "suffix trees of the prompt and earlier answers"
    ),
}


def engine_name(method: DraftMethod, kind: EngineKind) -> str | None:
    return METHODS[method].names.get(kind)


def offered_by(kind: EngineKind) -> list[str]:
    """The spec's methods this engine has, as the spec spells them."""
    return [m.value for m, info in METHODS.items() if kind in info.names]


# The flag whose choices are the release's speculative methods, where its parser lists them (vLLM has
# --spec-method since 0.26; older flag tables list none).
_METHOD_LIST_FLAG = {VLLM: "--spec-method"}


def listed_methods(table: FlagTable) -> frozenset[str] | None:
    """The engine's own names of the speculative methods this release's parser takes; None: its table lists none."""
    flag = _METHOD_LIST_FLAG.get(table.engine)
    option = None if flag is None else table.options.get(flag)
    return None if option is None or option.choices is None else frozenset(option.choices)


def releases_listing(kind: EngineKind, name: str) -> tuple[str, ...]:
    """The releases of the shipped flag tables that list the method `name` (the engine's name for it)."""
    return tuple(t.version for t in tables(kind) if name in (listed_methods(t) or ()))


def describe(draft: Draft, kind: EngineKind, engine: str) -> str:
    """One line on what the engine runs: its name for the method, the tokens, what is mounted."""
    method = METHODS[draft.method]
    name = engine_name(draft.method, kind) or draft.method.value
    parts = [f"{engine}'s {name}: {method.what}"]
    tokens = draft.num_speculative_tokens
    parts.append(f"{tokens} token(s) per step" if tokens is not None else f"tokens per step: {engine}'s default")
    if draft.prompt_lookup_min is not None or draft.prompt_lookup_max is not None:
        low = draft.prompt_lookup_min or draft.prompt_lookup_max
        high = draft.prompt_lookup_max or draft.prompt_lookup_min
        parts.append(f"n-grams of {low} to {high} token(s)")
    if draft.path is not None:
        parts.append(f"draft {draft.path} mounted read-only at {draft.mount}")
    elif method.weights is Weights.OPTIONAL:
        parts.append("from the model's own weights, nothing more mounted")
    else:
        parts.append("no draft weights, nothing mounted")
    return "; ".join(parts)


# The spec's methods by SGLang's names for them (NEXTN: its name for a model's own MTP layers).
SGLANG_NAMES = {m.value: info.names[SGLANG] for m, info in METHODS.items() if SGLANG in info.names}

# The per-model MTP method names vLLM still accepts, each read as mtp (vllm/config/speculative.py,
# MTPModelTypes); a recipe may carry them.
VLLM_MTP_NAMES = frozenset({
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp",
    "glm5_next_mtp",
})  # fmt: skip
