"""What an engine asks of a node's memory as it starts, on unified memory: on a Spark's GB10 the GPU's memory
is the node's RAM, so the engine's free memory is what /proc/meminfo says is available.

vLLM V1 checks at start (vllm/v1/worker/utils.py, `request_memory`) that the free memory of its startup
snapshot is at least ceil(gpu_memory_utilization x total), else: "Free memory on device cuda:0 (F/T GiB) on
startup is less than desired GPU memory utilization (U, R GiB). ...". On an integrated GPU the snapshot's
free memory is psutil's `available`, MemAvailable (vllm/utils/mem_utils.py, MemorySnapshot.measure), and its
total is CUDA's, MemTotal on GB10 (121.69 GiB). The check holds with --kv-cache-memory-bytes too, with the
fraction's default 0.9 when none is given.

SGLang's --mem-fraction-static is a share of the memory free when it starts (`pre_model_load_memory`), not of
the total, so there is no such gate: it stops only where the weights leave nothing of that share ("Not
enough memory. Please try to increase --mem-fraction-static."), or where a rank has less than 0.9 of another
rank's free memory ("The memory capacity is unbalanced"). TensorRT-LLM's free_gpu_memory_fraction is the share
of what CUDA reports free after loading the weights that goes to the KV cache: it sizes itself, no gate.
"""

from __future__ import annotations

import math

from compiler.plan import StartGate
from compiler.spec.model_facts import ModelFacts
from compiler.spec.typed import Spec

GIB = 1 << 30
# vLLM's CacheConfig.gpu_memory_utilization default.
VLLM_DEFAULT_FRACTION = 0.9
# What vLLM's own init (CUDA context, torch, its processes) takes before its snapshot. Measured on GB10:
# idle MemAvailable 110-111 GiB fell to about 102 GiB at the snapshot, 8-9 GiB (MiaAI-Lab
# GLM-5.3-Flash-EXL3-2x-DGX-Sparks issue 47); less on other kernels and drivers. The upper figure: a launch
# the preflight lets through passes vLLM's own check on either.
VLLM_INIT_OVERHEAD = 9 * GIB
# With kv_cache_memory vLLM sizes its KV cache from the bytes but still checks free memory against its
# fraction; the fraction sparkc then writes is the instance's real need: weights per rank, the KV cache,
# and this allowance for the rest it holds (its profiling run's activations, CUDA graphs, sampler buffers).
VLLM_ACTIVATION_RESERVE = 4 * GIB


def weights_bytes(spec: Spec, facts: ModelFacts) -> float | None:
    """The weights (with the draft model's) in bytes, where the spec or the compiling machine knows them."""
    draft = facts.draft_bytes or 0
    if facts.weights_bytes is not None:
        return facts.weights_bytes + draft
    if spec.model.size_gb is not None:
        return spec.model.size_gb * 1e9 + draft
    return None


def kv_fraction(spec: Spec, facts: ModelFacts, kv: int) -> float | None:
    """The fraction of the smallest node's memory that weights per rank, `kv` bytes of KV cache and the
    allowance above take, rounded up to a hundredth; None where the weights' size is not known."""
    weights = weights_bytes(spec, facts)
    if weights is None:
        return None
    engine = spec.engine
    need = weights / (engine.tensor_parallel * engine.pipeline_parallel) + kv + VLLM_ACTIVATION_RESERVE
    total = min(n.memory_gb for n in spec.cluster.nodes) * 1e9
    return min(math.ceil(need / total * 100) / 100, 1.0)


def vllm_gate(fraction: str, source: str) -> StartGate | None:
    """vLLM's start check with this fraction (as its flag or the image's entrypoint gives it; "" for none)."""
    text = fraction or str(VLLM_DEFAULT_FRACTION)
    try:
        value = float(text)
    except ValueError:
        return None  # not a number: vLLM's own parser refuses it before any check
    if not 0 < value <= 1:
        return None
    return StartGate(text, VLLM_INIT_OVERHEAD, "vLLM", "engine.gpu_memory_utilization", source)
