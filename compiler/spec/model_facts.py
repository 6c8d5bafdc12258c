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


@dataclass(frozen=True)
class ModelFacts:
    weights_bytes: int | None  # metadata.total_size of the model's index
    draft_bytes: int | None
    source: str  # where weights_bytes came from, for the message
    # The model's MTP layers as its config.json counts them (MTP_LAYER_KEYS); 0: it has none; None: unread.
    mtp_layers: int | None = None
    config: str = ""  # the config.json read for mtp_layers


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
    mtp = None
    if model.draft is not None and model.draft.method is DraftMethod.MTP:
        mtp = _mtp_layers(Path(folder) / CONFIG)
    source = f"{folder}/{INDEX}" if weights is not None else ""
    return ModelFacts(weights, draft, source, mtp, f"{folder}/{CONFIG}" if mtp is not None else "")


def _mtp_layers(path: Path) -> int | None:
    """The MTP layers a config.json counts (at its top or in its text_config), 0 for none; None: unreadable."""
    try:
        data = read_json(path, MAX_CONFIG_BYTES)
    except UnreadableFile:
        return None
    if not isinstance(data, dict):
        return None
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
