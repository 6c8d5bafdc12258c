"""What a deployment takes of each node it runs on: its memory budget and the fixed ports it listens on.

Several deployments may share a node (a big model across every node, a small one beside it); the budget and
the ports are what they must not overlap in. Both go into the plan and onto every container as labels, so the
launcher's preflight can add up what already runs.
"""

from __future__ import annotations

from compiler.diagnostics import Path
from compiler.engines import kv_cache_bytes
from compiler.engines.memory import VLLM_DEFAULT_FRACTION
from compiler.plan import HeadPort, MemoryBudget
from compiler.resolve.context import Deployment
from compiler.resolve.ports import RAY_WELL_KNOWN_PORTS, head_ports
from compiler.sizes import gigabytes
from compiler.spec.typed import Backend, Node, Source

# Memory in GB a node holds for itself before any engine, of its memory_gb (the total an engine's fraction is
# of): a Spark's total is MemTotal 121.69 GiB, of which an idle headless Spark has 110-111 GiB available
# (MiaAI-Lab GLM-5.3-Flash-EXL3-2x-DGX-Sparks issue 47), 11.2 GiB or 12 GB held by the OS. What deployments
# side by side take, their engines' own init included, must fit in the rest; the launcher's preflight then
# measures what each node really has.
OS_RESERVE_GB = 12
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
    is a per-instance share of the GPU's whole memory (on a Spark, the unified memory_gb), weights included,
    on top of what its own init took before it measured (compiler.engines.memory); with kv_cache_memory
    sparkc derives that share from the weights per rank and the KV cache. An engine without a start check
    takes the weights per rank plus kv_cache_memory. SGLang without a fraction sizes its static memory from
    the GPU at start: not known here (bytes 0)."""
    engine = d.spec.engine
    room = int((node.memory_gb - OS_RESERVE_GB) * 1e9)
    kv = kv_cache_bytes(d)
    gpus = f" x {node.gpus} GPUs" if node.gpus > 1 else ""
    gate = d.engine.start_gate(d)
    if kv and (gate is None or d.entrypoint.of("gpu_memory_utilization").source is not Source.DERIVED):
        total, _, _ = weights(d)
        if total is None:
            how = "kv_cache_memory plus weights of unknown size (give model.size_gb)"
            return MemoryBudget(0, room, how, "engine.kv_cache_memory")
        per_rank = total / (engine.tensor_parallel * engine.pipeline_parallel)
        how = f"weights {gigabytes(per_rank)} per rank + kv_cache_memory {gigabytes(kv)}{gpus}"
        return MemoryBudget(int(node.gpus * (per_rank + kv)), room, how, "engine.kv_cache_memory")
    given = d.value("gpu_memory_utilization")
    if not given and d.engine.memory_chosen_at_start is not None:
        how = f"{d.engine.memory_chosen_at_start}, chosen at start (set engine.gpu_memory_utilization)"
        return MemoryBudget(0, room, how, "engine.gpu_memory_utilization")
    fraction = float(gate.fraction) if gate else float(given) if given else VLLM_DEFAULT_FRACTION
    source = f"{gate.source} {gate.fraction}" if gate else f"gpu_memory_utilization {fraction:g}"
    overhead = gate.overhead if gate else 0
    how = f"{source} x {node.memory_gb:g} GB{gpus}"
    if gate and overhead:
        how += f" + {gigabytes(overhead)} of {gate.engine}'s own init"
    setting = "engine.kv_cache_memory" if kv else "engine.gpu_memory_utilization"
    return MemoryBudget(int(node.gpus * fraction * node.memory_gb * 1e9) + overhead, room, how, setting)


def node_ports(d: Deployment, node: Node) -> tuple[HeadPort, ...]:
    """The fixed ports the deployment listens on at this node (host networking: the node's own)."""
    ports: list[HeadPort] = []
    if node.name == d.head.name:
        ports += head_ports(d)
        if d.backend is Backend.RAY:
            ports += [HeadPort(port, what) for port, what in RAY_WELL_KNOWN_PORTS.items()]
        if d.probe and all(p.port != d.spec.launch.master_port for p in ports):
            ports.append(HeadPort(d.spec.launch.master_port, "fabric probe"))
    elif d.engine.ranks_answer_health:
        # The engine's ranks >= 1 answer /health on the API port (SGLang: a stand-in server) while they run.
        ports.append(HeadPort(d.api_port or 0, "API"))
    if d.backend is Backend.RAY:
        ports.append(HeadPort(RAY_AGENT_PORT, "Ray dashboard agent"))
    return tuple(ports)
