"""What the compiling machine can read about the weights: their size, from the safetensors index, and
their multi-token-prediction layers, from config.json.

Read once, before resolve, like the spec itself: resolve stays pure. Where nothing is readable (the
weights live on the nodes only, as usual), the spec's model.size_gb stands in; the facts only feed
diagnostics, never a generated file, so a compile gives the same files on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compiler.spec.typed import DraftMethod, Spec
from compiler.user_files import UnreadableFile, read_json, read_text

INDEX = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024  # an index lists tensors by name: a few MB for the largest models
MAX_REF_BYTES = 4096  # a Hugging Face cache ref holds one commit hash
CONFIG = "config.json"
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a model's config: a few KB
# The keys of a model's config.json that count its multi-token-prediction layers, as vLLM's
# SpeculativeConfig.hf_config_override reads them (its n_predict) for the models whose MTP it maps.
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
# Where a config.json says how long a sequence the model takes, as vLLM derives its max_model_len (the least
# of those present, times the RoPE scaling factor) and SGLang its context_length.
POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


@dataclass(frozen=True)
class ModelFacts:
    weights_bytes: int | None  # metadata.total_size of the model's index
    draft_bytes: int | None
    source: str  # where weights_bytes came from, for the message
    # The model's MTP layers as its config.json counts them (MTP_LAYER_KEYS); 0: it has none; None: unread.
    mtp_layers: int | None = None
    config: str = ""  # the config.json read for mtp_layers or max_positions
    # The longest sequence the model's config.json allows at most: the largest of POSITION_KEYS times the RoPE
    # scaling factor, at or above what the engines derive (they take the least); None: unread.
    max_positions: int | None = None


NO_FACTS = ModelFacts(None, None, "")


def read_model_facts(spec: Spec) -> ModelFacts:
    model = spec.model
    folder = model.path
    if model.hf is not None and not model.hf.pinned:
        folder = _resolved_snapshot(model.hf.repo_folder, model.hf.revision) or folder
    weights = _total_size(Path(folder) / INDEX)
    draft = None
    if model.draft is not None and model.draft.path is not None:
        draft = _total_size(Path(model.draft.path) / INDEX)
    config = _config(Path(folder) / CONFIG)
    mtp = None
    if config is not None and model.draft is not None and model.draft.method is DraftMethod.MTP:
        mtp = _mtp_layers(config)
    source = f"{folder}/{INDEX}" if weights is not None else ""
    positions = _max_positions(config) if config is not None else None
    read = f"{folder}/{CONFIG}" if config is not None else ""
    return ModelFacts(weights, draft, source, mtp, read, positions)


def _config(path: Path) -> dict[str, object] | None:
    """The model's config.json as a mapping; None where it is absent, unreadable or not one."""
    try:
        data = read_json(path, MAX_CONFIG_BYTES)
    except UnreadableFile:
        return None
    return data if isinstance(data, dict) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _max_positions(data: dict[str, object]) -> int | None:
    """An upper bound of the sequence length the engines derive from the config (at its top or text_config)."""
    for config in (data.get("text_config"), data):
        if not isinstance(config, dict):
            continue
        found = [n for key in POSITION_KEYS if (n := _count(config.get(key))) is not None]
        if not found:
            continue
        rope = config.get("rope_scaling") or config.get("rope_parameters")
        factor = rope.get("factor") if isinstance(rope, dict) else None
        scale = factor if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 1 else 1
        return int(max(found) * scale)
    return None


def _mtp_layers(data: dict[str, object]) -> int:
    """The MTP layers a config.json counts (at its top or in its text_config), 0 for none."""
    for config in (data, data.get("text_config")):
        if not isinstance(config, dict):
            continue
        for key in MTP_LAYER_KEYS:
            count = config.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                return count
    return 0


def _resolved_snapshot(repo_folder: str, revision: str) -> str | None:
    try:
        commit = read_text(Path(repo_folder) / "refs" / revision, MAX_REF_BYTES).strip()
    except (UnreadableFile, ValueError):
        return None
    return f"{repo_folder}/snapshots/{commit}" if commit else None


def _total_size(path: Path) -> int | None:
    """metadata.total_size of a safetensors index, or None where it is absent, unreadable or not a count."""
    try:
        data = read_json(path, MAX_INDEX_BYTES)  # a FIFO or /dev/zero: no facts, no wait
    except UnreadableFile:
        return None
    meta = data.get("metadata") if isinstance(data, dict) else None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None
