"""Speculative decoding in a recipe's command: the engine's speculative flags, read together, as model.draft
where the spec can say what they say; otherwise they stay in engine.args as written."""

from __future__ import annotations

from typing import Any

from compiler.engines import Engine
from compiler.spec.typed import DraftMethod
from compiler.tools.importer.output import PLACEHOLDER, Notes

_DRAFT_KEYS = {"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}


def read_draft(
    engine: Engine, speculative: dict[str, tuple[str, list[str]]], fields: dict[str, Any], warnings: Notes
) -> list[str]:
    """`speculative`: each speculative flag of the command -> its value and its words as written. Returns the
    words left for engine.args: none where model.draft (in `fields`) holds them, else all of them as written."""
    if not speculative:
        return []
    config = engine.read_speculative({option: value for option, (value, _) in speculative.items()})
    if config is not None and _draft(config, fields, warnings):
        return []
    return [w for _, written in speculative.values() for w in written]  # the engine's to judge, as written


def _draft(config: dict[str, Any], fields: dict[str, Any], warnings: Notes) -> bool:
    """A speculative config as model.draft, where the spec can say it (True: it is in `fields`). A draft
    named by its Hugging Face id becomes model.draft.repo, which fetch-model.sh downloads beside the model
    into a PLACEHOLDER path to fill; where the spec cannot carry the config, an error (the nodes run offline)."""
    model, tokens = config.get("model"), config.get("num_speculative_tokens")
    numbers = [config[k] for k in ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max") if k in config]
    fits = (
        set(config) <= _DRAFT_KEYS
        and config["method"] in {m.value for m in DraftMethod}
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in numbers)
        and (model is None or isinstance(model, str))
    )
    if not fits:
        if isinstance(model, str) and not model.startswith("/"):
            warnings.error(
                ("command",),
                f"--speculative-config names the draft {model} by its Hugging Face id, with keys model.draft "
                f"cannot hold ({', '.join(sorted(set(config) - _DRAFT_KEYS)) or 'its method or counts'}): nothing "
                "downloads it on the nodes (sparkc sets HF_HUB_OFFLINE=1); write the draft as model.draft (method, "
                "path, repo: fetch-model.sh then downloads it) without those keys, or download it to the same "
                "folder on every node, mount it with container.mounts and write its path in the container as the "
                "draft's model",
            )
        return False
    draft: dict[str, Any] = {"method": config["method"]}
    if isinstance(model, str):
        draft["path"] = model if model.startswith("/") else f"/{PLACEHOLDER}/models/{model.rsplit('/', 1)[-1]}"
        if not model.startswith("/"):
            draft["repo"] = model  # fetch-model.sh downloads it into path, beside the model
    if tokens is not None:
        draft["num_speculative_tokens"] = tokens
    draft.update((k, config[k]) for k in ("prompt_lookup_min", "prompt_lookup_max") if k in config)
    fields["model.draft"] = draft
    if isinstance(model, str) and not model.startswith("/"):
        warnings.add(
            ("command",),
            f"the draft {model} is named by its Hugging Face id: it is model.draft.repo, which fetch-model.sh "
            f"downloads into model.draft.path on the head (now {draft['path']}: write the folder) and "
            "distribute.sh copies to the other nodes",
        )
    return True
