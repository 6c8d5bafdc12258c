"""Rules about TensorRT-LLM and mpirun: what trtllm-serve and Open MPI would refuse, or do otherwise, at launch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from compiler.diagnostics import Diagnostic, error
from compiler.engines.trtllm import FLAG_OPTIONS, OPTION_FIELDS
from compiler.resolve.context import Deployment
from compiler.spec.typed import Backend


def backend_fits_engine(d: Deployment) -> Iterator[Diagnostic]:
    engine = d.spec.engine
    if d.backend is Backend.MPI and not d.engine.supports_mpi:
        own = d.engine.default_backend(len(d.spec.cluster.nodes))
        yield error(
            engine.at("backend"),
            f"only TensorRT-LLM runs under mpirun; {d.engine.name} forms its group with backend: {own}",
        )
    if d.engine.supports_mpi and d.backend is Backend.NATIVE and d.multi:
        yield error(
            engine.at("backend"),
            "TensorRT-LLM forms a multi-node group only under MPI (mpirun starting trtllm-llmapi-launch on every "
            "node); write backend: mpi, or leave engine.backend out",
        )


def served_name(d: Deployment) -> Iterator[Diagnostic]:
    """trtllm-serve has no --served-model-name: a local folder is served under the folder's own name."""
    model = d.spec.model
    if not d.engine.serves_folder_name or model.name is None:
        return
    folder = PurePosixPath(model.mount).name
    if model.name != folder:
        yield error(
            model.at("name"),
            f"trtllm-serve serves a local folder under the folder's name ({folder!r}; it has no "
            f"--served-model-name): remove model.name, or set model.mount to a folder named {model.name!r}",
        )


def draft_model(d: Deployment) -> Iterator[Diagnostic]:
    if not d.engine.drafts_from_spec and d.spec.model.draft is not None:
        yield error(
            d.spec.model.at("draft"),
            "sparkc writes no TensorRT-LLM speculative_config from model.draft; remove model.draft and give "
            "engine.llm_api_options.speculative_config, with the draft's folder under container.mounts",
        )


def llm_api_options(d: Deployment) -> Iterator[Diagnostic]:
    engine = d.spec.engine
    options = engine.llm_api_options
    if not options:
        return
    if not d.engine.takes_llm_api_options:
        yield error(
            engine.at("llm_api_options"),
            f"llm_api_options are TensorRT-LLM's (trtllm-serve --extra_llm_api_options); {d.engine.name} takes "
            "its own flags in engine.args",
        )
        return
    for key, field in FLAG_OPTIONS.items():
        if key in options:
            yield error(
                engine.at("llm_api_options", key),
                f"{key} is set from {field} (the file would override trtllm-serve's flag); use {field}",
            )
    kv = options.get("kv_cache_config")
    if kv is not None and not isinstance(kv, dict):
        yield error(engine.at("llm_api_options", "kv_cache_config"), "kv_cache_config must be a mapping of keys")
        return
    for (section, key), field in OPTION_FIELDS.items():
        if kv and key in kv:
            yield error(
                engine.at("llm_api_options", section, key),
                f"{section}.{key} is written from {field}; set {field} instead",
            )


RULES = (backend_fits_engine, served_name, draft_model, llm_api_options)
