"""Rules about sizes, the model (Hugging Face cache, speculative decoding) and memory. They only report."""

from __future__ import annotations

import math
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.engines import kv_cache_bytes
from compiler.engines.speculative import (
    METHODS,
    Method,
    Weights,
    engine_name,
    listed_methods,
    offered_by,
    releases_listing,
)
from compiler.resolve.budget import OS_RESERVE_GB
from compiler.resolve.budget import weights as model_weights
from compiler.resolve.context import Deployment
from compiler.sizes import MAX_BYTES, RULE, gigabytes, size_bytes
from compiler.spec.model_facts import MTP_LAYER_KEYS
from compiler.spec.typed import Draft, DraftMethod, Node


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
    """Speculative decoding as the chosen engine would take it; each check names the engine rule it mirrors."""
    draft, model, engine = d.spec.model.draft, d.spec.model, d.engine
    if draft is None or not engine.drafts_from_spec:  # TensorRT-LLM: rules/mpi.py says where drafts go
        return
    method = METHODS[draft.method]
    name = engine_name(draft.method, engine.kind)
    refused = method.not_carried.get(engine.kind)
    if refused is not None:
        yield error(
            draft.at("method"),
            f"{refused}: write another method {engine.name} has ({', '.join(offered_by(engine.kind))}), or "
            "give its speculative flags in engine.args",
        )
        return
    if name is None:
        # vLLM: SpeculativeMethod is a Literal of its methods; SGLang: SpeculativeAlgorithm.from_string
        # raises "Unknown speculative algorithm name".
        yield error(
            draft.at("method"),
            f"{engine.name} has no speculative method {draft.method.value}; write one it has: "
            f"{', '.join(offered_by(engine.kind))}",
        )
        return
    yield from _weights_of(draft, method)
    yield from _release_has(d, draft, name)
    if draft.num_speculative_tokens is None and engine.kind in method.needs_tokens:
        # vLLM SpeculativeConfig._verify_args: "num_speculative_tokens must be provided with speculative model
        # unless the draft model config contains an n_predict parameter".
        yield error(
            draft.location,
            f"{engine.name}'s {name} needs num_speculative_tokens, the tokens proposed per step: add it (1 to 32)",
        )
    yield from _prompt_lookup(d, draft, name)
    if draft.method is DraftMethod.MTP and draft.path is None:
        yield from _mtp_layers(d, draft, name)
    if draft.mount is None:
        return
    for a, b in ((draft.mount, model.mount), (model.mount, draft.mount)):
        if a == b or b.startswith(a.rstrip("/") + "/"):
            yield error(
                draft.at("mount" if draft.is_given("mount") else "path"),
                f"the draft model would appear at {draft.mount}, over or inside the model at {model.mount}: "
                "give model.draft.mount another folder",
            )
            return


def _weights_of(draft: Draft, method: Method) -> Iterator[Diagnostic]:
    if draft.path is None and draft.is_given("mount"):
        yield error(draft.at("mount"), "mount without path: give model.draft.path, the draft's folder on every node")
    if method.weights is Weights.REQUIRED and draft.path is None:
        # vLLM: "num_speculative_tokens was provided but without speculative model"; SGLang's STANDALONE
        # and EAGLE workers load --speculative-draft-model-path.
        yield error(
            draft.location,
            f"{draft.method.value} proposes with weights of its own: give model.draft.path, the draft's folder "
            "(the same on every node)",
        )
    if method.weights is Weights.NONE and draft.path is not None:
        # vLLM sets the config's model to the method's own name for these; a folder would be read by nothing.
        yield error(
            draft.at("path"),
            f"{draft.method.value} proposes from the text itself and reads no draft weights: remove model.draft.path",
        )


def _release_has(d: Deployment, draft: Draft, name: str) -> Iterator[Diagnostic]:
    """A newer method, against the method list of the image's release (vLLM's --spec-method choices): refused
    only where sparkc has that release's own table; else a warning naming the table it compared with."""
    if d.engine.kind not in METHODS[draft.method].recent:
        return
    choice, engine = d.flag_choice, d.engine.name
    listed, table = listed_methods(choice.table), choice.table.version
    release = f"{engine} {choice.release}" if choice.release else f"the {engine} release in {d.spec.container.image}"
    if listed is not None and name in listed:
        return
    have = releases_listing(d.engine.kind, name)
    where = f"the flag tables of {engine} {', '.join(have)} list it" if have else "no flag table of sparkc lists it"
    if listed is None:
        yield warning(
            draft.at("method"),
            f"sparkc cannot tell whether {release} has the speculative method {name}: the flag table it compared "
            f"with, {engine} {table}'s, lists no methods ({where}); a release without it refuses it at start",
        )
    elif choice.binding:
        yield error(
            draft.at("method"), f"{release} has no speculative method {name} ({where}): use an image of such a release"
        )
    else:
        yield warning(
            draft.at("method"),
            f"{engine} {table}, the flag table sparkc compared {release} with, has no speculative method {name} "
            f"({where}): {release} may refuse it at start",
        )


def _prompt_lookup(d: Deployment, draft: Draft, name: str) -> Iterator[Diagnostic]:
    given = [key for key in ("prompt_lookup_min", "prompt_lookup_max") if draft.is_given(key)]
    if not given:
        return
    if d.engine.kind not in METHODS[draft.method].window:
        # vLLM reads them for ngram and ngram_gpu only (zeroed otherwise); SGLang's NGRAM matches with its
        # own trie (--speculative-ngram-* in engine.args) and has no such field.
        for key in given:
            yield error(
                draft.at(key),
                f"{key} is vLLM's n-gram window (method ngram or ngram_gpu); {d.engine.name}'s {name} has none: "
                "remove it",
            )
        return
    low, high = draft.prompt_lookup_min, draft.prompt_lookup_max
    if low is not None and high is not None and low > high:
        # vLLM SpeculativeConfig.__post_init__: "prompt_lookup_min=... must be <= prompt_lookup_max=...".
        yield error(draft.at("prompt_lookup_min"), f"{low} is more than prompt_lookup_max {high}: vLLM refuses it")


def _mtp_layers(d: Deployment, draft: Draft, name: str) -> Iterator[Diagnostic]:
    """MTP drafts with the model's own layers: where the compiling machine can read its config.json, it
    must count some (vLLM maps only such models to an MTP draft, else "Unsupported speculative method")."""
    layers, config = d.facts.mtp_layers, d.facts.config
    if layers is None:
        return
    if layers == 0:
        yield error(
            draft.at("method"),
            f"{d.engine.name}'s {name} drafts with the model's own multi-token-prediction layers, and {config} counts "
            f"none ({', '.join(MTP_LAYER_KEYS)}): serve a model that has them, or choose another method",
        )
        return
    tokens = draft.num_speculative_tokens
    if d.engine.kind in METHODS[draft.method].layer_multiple and tokens and tokens > layers and tokens % layers:
        yield error(
            draft.at("num_speculative_tokens"),
            f"{d.engine.name} reuses the model's {layers} MTP layer(s) (as {config} counts them): "
            f"num_speculative_tokens {tokens} must be at most {layers} or a multiple of it",
        )


def kv_cache_budget(d: Deployment) -> Iterator[Diagnostic]:
    engine = d.spec.engine
    if engine.kv_cache_memory is None:
        return
    if d.engine.kv_budget_refusal is not None:
        yield error(engine.at("kv_cache_memory"), d.engine.kv_budget_refusal)
    elif engine.gpu_memory_utilization is not None and d.engine.start_gate(d) is not None:
        # vLLM: the fix that would have dropped its start check with kv bytes (vllm PR 39852) was closed.
        yield warning(
            engine.at("gpu_memory_utilization"),
            f"{d.engine.name} sizes its KV cache from kv_cache_memory; gpu_memory_utilization then only sets its "
            "start check (that share of the node's memory must be free once its own init is done), so keep it at "
            "what the weights per rank and the KV cache need; without it sparkc derives that share",
        )
    elif engine.gpu_memory_utilization is not None:
        yield warning(
            engine.at("gpu_memory_utilization"),
            f"{d.engine.name} ignores gpu_memory_utilization when kv_cache_memory is set; keep one of them",
        )
    elif d.engine.start_gate(d) is not None and not d.value("gpu_memory_utilization"):
        yield warning(
            engine.at("kv_cache_memory"),
            f"{d.engine.name} still checks at start that gpu_memory_utilization (default 0.9) of the node's memory "
            "is free, which a Spark never has: give model.size_gb (or weights the compiling machine can read) so "
            "that sparkc derives the share the weights and the KV cache need, or set engine.gpu_memory_utilization",
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


def start_gate_fits(d: Deployment) -> Iterator[Diagnostic]:
    """The engine's start check of free memory against what an idle node of the spec's memory_gb has."""
    gate = d.engine.start_gate(d)
    if gate is None:
        return
    engine = d.spec.engine
    where = engine.at("gpu_memory_utilization") if engine.gpu_memory_utilization is not None else engine.location
    for node in d.spec.cluster.nodes:
        if node.gpus != 1:
            continue  # discrete GPUs: their own memory, not the node's
        free = (node.memory_gb - OS_RESERVE_GB) * 1e9 - gate.overhead
        ceiling = math.floor(free / (node.memory_gb * 1e9) * 100) / 100
        if float(gate.fraction) > ceiling:
            yield warning(
                where,
                f"{gate.engine} refuses to start unless {gate.fraction} of {node.name}'s memory ({gate.source}) is "
                f"free once its own init took about {gigabytes(gate.overhead)}; an idle {node.memory_gb:g} GB node "
                f"({OS_RESERVE_GB} GB held by the OS) has room for at most {ceiling:.2f}: set "
                f"engine.gpu_memory_utilization to {ceiling:.2f} or less (the launch's preflight measures each node "
                "and stops where it does not fit)",
            )
            return


RULES = (sizes, hf_cache, draft_model, kv_cache_budget, memory_fits, start_gate_fits)
