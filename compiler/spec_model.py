"""The spec's model section as typed values: weights on the host or in a Hugging Face cache, the revision,
a draft model for speculative decoding. Built once, right after validation, like the rest of compiler.spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from compiler.spec import Architecture, Model, Section

if TYPE_CHECKING:
    from compiler.spec import _Given

# A full commit id names a snapshot folder of a Hugging Face cache; anything else is a branch or tag,
# which the cache resolves through refs/<name>.
COMMIT = re.compile(r"[0-9a-f]{40}")
HF_CONTAINER_CACHE = "/root/.cache/huggingface/hub"  # where huggingface_hub looks by default, as root


class DraftMethod(StrEnum):
    DRAFT_MODEL = "draft_model"  # a smaller model of the same family
    EAGLE = "eagle"
    EAGLE3 = "eagle3"


@dataclass(frozen=True)
class Draft(Section):
    path: str
    mount: str  # where the container sees the draft: draft.mount, else the host path
    method: DraftMethod
    num_speculative_tokens: int


@dataclass(frozen=True)
class HfCache(Section):
    """Weights in a Hugging Face cache: `<cache>/models--ORG--NAME/{refs,snapshots,blobs}`."""

    cache: str  # the host's hub folder
    repo: str  # ORG/NAME
    revision: str  # a commit, or a branch or tag resolved through refs/ at launch

    @property
    def repo_folder(self) -> str:
        return f"{self.cache}/models--{self.repo.replace('/', '--')}"

    @property
    def pinned(self) -> bool:
        return COMMIT.fullmatch(self.revision) is not None


def build_model(model: dict[str, Any], g: _Given) -> Model:
    arch = model.get("architecture", {})
    hf = _hf_cache(model, g)
    # The Hugging Face form: the snapshot, as the container sees it, sits where the cache's layout puts it
    # (its files are links into ../../blobs, mounted beside it).
    path = model["path"] if hf is None else f"{hf.repo_folder}/snapshots/{hf.revision}"
    default_mount = (
        path if hf is None else f"{HF_CONTAINER_CACHE}/{hf.repo_folder.rpartition('/')[2]}/snapshots/{hf.revision}"
    )
    return Model(
        ("model",),
        g.keys("model"),
        path=path,
        mount=model.get("mount", default_mount),
        name=model.get("name", hf.repo if hf else None),
        architecture=Architecture(
            ("model", "architecture"),
            g.keys("model", "architecture"),
            attention_heads=arch.get("attention_heads"),
            kv_heads=arch.get("kv_heads"),
            experts=arch.get("experts"),
        ),
        draft=_draft(model.get("draft"), g),
        revision=model.get("revision"),
        hf=hf,
        size_gb=model.get("size_gb"),
    )


def _hf_cache(model: dict[str, Any], g: _Given) -> HfCache | None:
    if "hf_cache" not in model:
        return None
    return HfCache(("model",), g.keys("model"), model["hf_cache"], model.get("repo", ""), model.get("revision", "main"))


def _draft(draft: dict[str, Any] | None, g: _Given) -> Draft | None:
    if draft is None:
        return None
    return Draft(
        ("model", "draft"),
        g.keys("model", "draft"),
        path=draft["path"],
        mount=draft.get("mount", draft["path"]),
        method=DraftMethod(draft["method"]),
        num_speculative_tokens=draft["num_speculative_tokens"],
    )
