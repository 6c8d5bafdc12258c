"""Checks an engine makes on the model directory before it loads anything."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass


class ModelError(Exception):
    """Raised with the message the real engine prints."""


@dataclass(frozen=True)
class ModelInfo:
    path: str
    num_heads: int | None
    num_kv_heads: int | None
    max_positions: int | None
    num_experts: int | None = None  # a mixture of experts' routed experts

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)


def inspect_model(path: str) -> ModelInfo:
    if not os.path.isdir(path):
        raise ModelError(
            f"Invalid repository ID or local directory specified: '{path}'.\n"
            "Please verify the following requirements:\n"
            "1. Provide a valid Hugging Face repository ID.\n"
            "2. Specify a local directory that contains a recognized configuration file."
        )
    config: dict[str, object] = {}
    cfg_path = os.path.join(path, "config.json")
    if os.path.isfile(cfg_path):
        try:
            with open(cfg_path, encoding="utf-8") as fh:
                loaded = json.load(fh)
            if isinstance(loaded, dict):
                config = loaded
        except (OSError, ValueError) as exc:
            raise ModelError(f"Failed to read model config {cfg_path}: {exc}") from exc

    def _int(key: str) -> int | None:
        value = config.get(key)
        return value if isinstance(value, int) else None

    return ModelInfo(
        path=path,
        num_heads=_int("num_attention_heads"),
        num_kv_heads=_int("num_key_value_heads"),
        max_positions=_int("max_position_embeddings"),
        num_experts=_int("num_experts") or _int("num_local_experts") or _int("n_routed_experts"),
    )


def check_layout(info: ModelInfo, tp: int) -> None:
    """The layout rule engines only report after parsing the model config (DOMAIN: F30)."""
    if info.num_heads is not None and info.num_heads % tp != 0:
        raise ModelError(
            f"Total number of attention heads ({info.num_heads}) must be divisible by tensor parallel size ({tp})."
        )
    if info.num_kv_heads is not None and info.num_kv_heads % tp != 0 and tp % info.num_kv_heads != 0:
        raise ModelError(
            f"Total number of key-value heads ({info.num_kv_heads}) must be divisible by tensor parallel size ({tp})."
        )


def effective_max_len(info: ModelInfo, requested: int | None) -> int:
    derived = info.max_positions or 8192
    if requested is None:
        return derived
    if info.max_positions is not None and requested > info.max_positions:
        raise ModelError(
            f"User-specified max_model_len ({requested}) is greater than the derived "
            f"max_model_len (max_position_embeddings={info.max_positions} in model's config.json)."
        )
    return requested


def check_experts(info: ModelInfo, ep: int) -> None:
    """SGLang's expert parallel places the same number of experts on every rank (its expert location map
    asserts num_physical_experts % ep_size == 0)."""
    if ep > 1 and info.num_experts is not None and info.num_experts % ep:
        raise ModelError(f"AssertionError: num_physical_experts ({info.num_experts}) % ep_size ({ep}) != 0")
