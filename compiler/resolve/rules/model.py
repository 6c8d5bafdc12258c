"""Rules about sizes, the model (Hugging Face cache, draft model) and memory. They only report."""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.engines import kv_cache_bytes
from compiler.resolve.budget import OS_RESERVE_GB
from compiler.resolve.budget import weights as model_weights
from compiler.resolve.context import Deployment
from compiler.sizes import MAX_BYTES, RULE, gigabytes, size_bytes
from compiler.spec.typed import EngineKind, Node


def sizes(d: Deployment) -> Iterator[Diagnostic]:
    container, engine = d.spec.container, d.spec.engine
    given = [(container.at("shm_size"), container.shm_size), (engine.at("kv_cache_memory"), engine.kv_cache_memory)]
    for path, value in given:
        count = None if value is None else size_bytes(value)
        if count is None:  # absent, or the schema already refused it
            continue
        if count > MAX_BYTES:
            yield error(path, f"{value!r} is more bytes than docker can hold (at most {MAX_BYTES}); write {RULE}")
        elif count == 0:
            yield warning(path, "0 means the engine's or docker's own default; remove the key, or give a size")


def hf_cache(d: Deployment) -> Iterator[Diagnostic]:
    model = d.spec.model
    if model.is_given("hf_cache") and model.is_given("path"):
        yield error(model.at("path"), "give the weights once: path (a folder) or hf_cache with repo, not both")
    if model.is_given("hf_cache") and not model.is_given("repo"):
        yield error(model.at("hf_cache"), "hf_cache needs repo, the Hugging Face repo id to serve (ORG/NAME)")


def draft_model(d: Deployment) -> Iterator[Diagnostic]:
    draft, model = d.spec.model.draft, d.spec.model
    if draft is None:
        return
    for a, b in ((draft.mount, model.mount), (model.mount, draft.mount)):
        if a == b or b.startswith(a.rstrip("/") + "/"):
            yield error(
                draft.at("mount" if draft.is_given("mount") else "path"),
                f"the draft model would appear at {draft.mount}, over or inside the model at {model.mount}: "
                "give model.draft.mount another folder",
            )
            return


def kv_cache_budget(d: Deployment) -> Iterator[Diagnostic]:
    engine = d.spec.engine
    if engine.kv_cache_memory is None:
        return
    if engine.kind is EngineKind.SGLANG:
        yield error(
            engine.at("kv_cache_memory"),
            "SGLang has no absolute KV-cache budget in bytes (its --max-total-tokens counts tokens, "
            "--mem-fraction-static is a fraction); set engine.gpu_memory_utilization instead",
        )
    elif engine.gpu_memory_utilization is not None:
        yield warning(
            engine.at("gpu_memory_utilization"),
            "vLLM ignores gpu_memory_utilization when kv_cache_memory is set; keep one of them",
        )


def memory_fits(d: Deployment) -> Iterator[Diagnostic]:
    """Weights per rank (plus the KV-cache budget) against each node's memory less what its OS needs."""
    weights, where, what = model_weights(d)
    if weights is None:
        return
    engine = d.spec.engine
    ranks = engine.tensor_parallel * engine.pipeline_parallel
    per_rank = weights / ranks
    kv = kv_cache_bytes(d) or 0
    for node in d.spec.cluster.nodes:
        need = node.gpus * (per_rank + kv)
        room = (node.memory_gb - OS_RESERVE_GB) * 1e9
        if need > room:
            yield warning(where, _does_not_fit(node, what, ranks, per_rank, kv, need, room))
    fraction = engine.gpu_memory_utilization
    if fraction is not None and not kv:
        for node in d.spec.cluster.nodes:
            if per_rank >= fraction * node.memory_gb * 1e9:
                yield warning(
                    engine.at("gpu_memory_utilization"),
                    f"{what}: {gigabytes(per_rank)} per rank, but gpu_memory_utilization {fraction} lets the "
                    f"engine use {gigabytes(fraction * node.memory_gb * 1e9)} on {node.name}: no room is left for "
                    "the KV cache, and the engine stops after loading",
                )


def _does_not_fit(node: Node, what: str, ranks: int, per_rank: float, kv: int, need: float, room: float) -> str:
    kv_text = f" + KV cache {gigabytes(kv)}" if kv else ""
    gpus = f" x {node.gpus} GPUs" if node.gpus > 1 else ""
    return (
        f"{node.name} cannot hold this launch: {what} over {ranks} rank(s) is {gigabytes(per_rank)} per rank"
        f"{kv_text}{gpus} = {gigabytes(need)}, more than its {node.memory_gb} GB less {OS_RESERVE_GB} GB for the "
        f"OS ({gigabytes(room)}); use more nodes (tensor_parallel/pipeline_parallel), a smaller quantization "
        "or a smaller KV cache"
    )


RULES = (sizes, hf_cache, draft_model, kv_cache_budget, memory_fits)
