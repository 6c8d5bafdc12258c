"""What the compiling machine can read about the weights: their size, from the safetensors index.

Read once, before resolve, like the spec itself: resolve stays pure. Where nothing is readable (the
weights live on the nodes only, as usual), the spec's model.size_gb stands in; the facts only feed a
warning, never a generated file, so a compile gives the same files on any machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from compiler.spec.typed import Spec
from compiler.user_files import UnreadableFile, read_text

INDEX = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024  # an index lists tensors by name: a few MB for the largest models
MAX_REF_BYTES = 4096  # a Hugging Face cache ref holds one commit hash


@dataclass(frozen=True)
class ModelFacts:
    weights_bytes: int | None  # metadata.total_size of the model's index
    draft_bytes: int | None
    source: str  # where weights_bytes came from, for the message


NO_FACTS = ModelFacts(None, None, "")


def read_model_facts(spec: Spec) -> ModelFacts:
    model = spec.model
    folder = model.path
    if model.hf is not None and not model.hf.pinned:
        folder = _resolved_snapshot(model.hf.repo_folder, model.hf.revision) or folder
    weights = _total_size(Path(folder) / INDEX)
    draft = None
    if model.draft is not None:
        draft = _total_size(Path(model.draft.path) / INDEX)
    return ModelFacts(weights, draft, f"{folder}/{INDEX}" if weights is not None else "")


def _resolved_snapshot(repo_folder: str, revision: str) -> str | None:
    try:
        commit = read_text(Path(repo_folder) / "refs" / revision, MAX_REF_BYTES).strip()
    except (UnreadableFile, ValueError):
        return None
    return f"{repo_folder}/snapshots/{commit}" if commit else None


def _total_size(path: Path) -> int | None:
    """metadata.total_size of a safetensors index, or None where it is absent, unreadable or not a count."""
    try:
        data = json.loads(read_text(path, MAX_INDEX_BYTES))  # a FIFO or /dev/zero: no facts, no wait
    except (UnreadableFile, ValueError, RecursionError):
        return None
    meta = data.get("metadata") if isinstance(data, dict) else None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None
