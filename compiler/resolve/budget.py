"""What a deployment takes of each node it runs on: its memory budget and the fixed ports it listens on.

Several deployments may share a node (a big model across every node, a small one beside it); the budget and
the ports are what they must not overlap in. Both go into the plan and onto every container as labels, so the
launcher's preflight can add up what already runs.
"""

from __future__ import annotations

from compiler.diagnostics import Path
from compiler.engines import kv_cache_bytes
from compiler.plan import HeadPort, MemoryBudget
from compiler.resolve.context import Deployment
from compiler.resolve.ports import RAY_WELL_KNOWN_PORTS, head_ports
from compiler.sizes import gigabytes
from compiler.spec.typed import Backend, EngineKind, Node

# Memory in GB a node keeps for itself before the engine: DGX OS with its desktop, docker, and the
# engine's CPU-side processes (Python, the CUDA context, Ray, the tokenizer) take about this much of a
# Spark's 128 GB of unified memory; it is also close to what vLLM's default gpu_memory_utilization of
# 0.9 leaves over (12.8 GB).
OS_RESERVE_GB = 10
# vLLM's CacheConfig.gpu_memory_utilization default: the instance's share of the GPU's whole memory.
VLLM_DEFAULT_FRACTION = 0.9
# Ray's dashboard agent listens on this port on every node of a Ray cluster (ray start's
# --dashboard-agent-listen-port default): two Ray deployments on one node would both want it.
RAY_AGENT_PORT = 52365


def weights(d: Deployment) -> tuple[float | None, Path, str]:
    """The weights in bytes (with the draft model's), where the spec says so, and how that reads."""
    model, facts = d.spec.model, d.facts
    draft = facts.draft_bytes or 0
    if facts.weights_bytes is not None:
        where = model.at("hf_cache") if model.hf is not None else model.at("path")
        return facts.weights_bytes + draft, where, f"weights of {gigabytes(facts.weights_bytes)} ({facts.source})"
    if model.size_gb is not None:
        return model.size_gb * 1e9 + draft, model.at("size_gb"), f"weights of {model.size_gb} GB (model.size_gb)"
    return None, model.location, ""


def memory_budget(d: Deployment, node: Node) -> MemoryBudget:
    """What the engine takes of this node's memory, per GPU times its GPUs. vLLM's gpu_memory_utilization
    is a per-instance share of the GPU's whole memory (on a Spark, the unified memory_gb), weights included;
    kv_cache_memory instead gives the KV cache in bytes, to which the weights per rank add. SGLang without
    a fraction sizes its static memory from the GPU at start: not known here (bytes 0)."""
    engine = d.spec.engine
    room = int((node.memory_gb - OS_RESERVE_GB) * 1e9)
    kv = kv_cache_bytes(d)
    gpus = f" x {node.gpus} GPUs" if node.gpus > 1 else ""
    if kv:
        total, _, _ = weights(d)
        if total is None:
            how = "kv_cache_memory plus weights of unknown size (give model.size_gb)"
            return MemoryBudget(0, room, how, "engine.kv_cache_memory")
        per_rank = total / (engine.tensor_parallel * engine.pipeline_parallel)
        how = f"weights {gigabytes(per_rank)} per rank + kv_cache_memory {gigabytes(kv)}{gpus}"
        return MemoryBudget(int(node.gpus * (per_rank + kv)), room, how, "engine.kv_cache_memory")
    given = d.value("gpu_memory_utilization")
    if not given and d.engine.kind is EngineKind.SGLANG:
        how = "SGLang's own mem_fraction_static, chosen at start (set engine.gpu_memory_utilization)"
        return MemoryBudget(0, room, how, "engine.gpu_memory_utilization")
    fraction = float(given) if given else VLLM_DEFAULT_FRACTION
    source = "gpu_memory_utilization" if given else "vLLM's default gpu_memory_utilization"
    how = f"{source} {fraction:g} x {node.memory_gb:g} GB{gpus}"
    return MemoryBudget(int(node.gpus * fraction * node.memory_gb * 1e9), room, how, "engine.gpu_memory_utilization")


def node_ports(d: Deployment, node: Node) -> tuple[HeadPort, ...]:
    """The fixed ports the deployment listens on at this node (host networking: the node's own)."""
    ports: list[HeadPort] = []
    if node.name == d.head.name:
        ports += head_ports(d)
        if d.backend is Backend.RAY:
            ports += [HeadPort(port, what) for port, what in RAY_WELL_KNOWN_PORTS.items()]
        if d.probe and all(p.port != d.spec.launch.master_port for p in ports):
            ports.append(HeadPort(d.spec.launch.master_port, "fabric probe"))
    elif d.engine.kind is EngineKind.SGLANG:
        # SGLang's ranks >= 1 answer /health on the API port (a stand-in server) while they run.
        ports.append(HeadPort(d.api_port or 0, "API"))
    if d.backend is Backend.RAY:
        ports.append(HeadPort(RAY_AGENT_PORT, "Ray dashboard agent"))
    return tuple(ports)
