"""The engines' start checks of free memory on unified memory (a Spark's GB10), from the node's /proc/meminfo:
the simulator bind-mounts each node's own over the container's, where the real one is.

- vLLM V1 (vllm/v1/worker/utils.py request_memory, before its distributed init): the free memory of its
  startup snapshot must be at least ceil(gpu_memory_utilization x total); on an integrated GPU free is
  MemAvailable and total MemTotal. The snapshot comes after vLLM's own init, which the stand-in does not
  really do: it counts SPARKC_STANDIN_VLLM_INIT_GIB (9, as measured on GB10) as taken.
- SGLang (model_runner init_torch_distributed): every rank's free memory (MemAvailable for SM 121) must be at
  least 0.9x its own of the smallest across the group; its KV cache is what --mem-fraction-static of that
  leaves after the weights ("Not enough memory" where nothing is left).
- TensorRT-LLM: free_gpu_memory_fraction of what CUDA reports free after the load (MemFree on GB10: page
  cache counts as used) becomes the KV cache; it checks nothing at start.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .config import env_float

GIB = 1 << 30
MEMINFO = "/proc/meminfo"


class MemoryError_(Exception):
    """The engine refuses to start; the message is the engine's own."""


def meminfo() -> dict[str, int]:
    """/proc/meminfo's fields in bytes."""
    fields: dict[str, int] = {}
    # a stand-in started outside a simulated node (the simulator's own tests) may be given a node's file
    for line in Path(os.environ.get("SPARKC_STANDIN_MEMINFO", MEMINFO)).read_text().splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            fields[name] = int(words[0]) * (1024 if words[1:2] == ["kB"] else 1)
    return fields


def _gib(value: float) -> str:
    return f"{value / GIB:.2f}"  # vLLM's format_gib


def vllm_request_memory(fraction: float) -> int:
    """The bytes vLLM asks for, or its ValueError where its snapshot has less free."""
    info = meminfo()
    total = info["MemTotal"]
    init = (env_float("SPARKC_STANDIN_VLLM_INIT_GIB", 9.0) or 0.0) * GIB
    free = info["MemAvailable"] - int(init)
    requested = math.ceil(total * fraction)
    if free < requested:
        raise MemoryError_(
            f"Free memory on device cuda:0 ({_gib(free)}/{_gib(total)} GiB) on startup is less than desired GPU "
            f"memory utilization ({fraction}, {_gib(requested)} GiB). Decrease GPU memory utilization or reduce "
            "GPU memory used by other processes."
        )
    return requested


def available_gb() -> float:
    """What SGLang's get_available_gpu_memory says on GB10: MemAvailable in GiB (SPARKC_STANDIN_FREE_MEMORY_GB
    wins where a test sets it)."""
    given = env_float("SPARKC_STANDIN_FREE_MEMORY_GB", None)
    return given if given is not None else meminfo()["MemAvailable"] / GIB


def weights_gb(model_dir: str, ranks: int) -> float:
    """The model folder's weights per rank, in GiB, as the load would take them."""
    folder = Path(model_dir)
    if not folder.is_dir():
        return 0.0
    size = sum(p.stat().st_size for p in folder.rglob("*.safetensors") if p.is_file())
    return size / GIB / max(ranks, 1)


def sglang_memory_pool(pre_load_gb: float, weights: float, fraction: float) -> float:
    """SGLang's rest memory for the KV cache: what stays free after the load less the (1 - fraction) share of
    what was free before it it keeps for activations."""
    rest = (pre_load_gb - weights) - pre_load_gb * (1 - fraction)
    if rest <= 0:
        raise MemoryError_("Not enough memory. Please try to increase --mem-fraction-static.")
    return rest


def trtllm_kv_bytes(fraction: float) -> int:
    """TensorRT-LLM's KV cache: the fraction of what CUDA reports free (MemFree on GB10)."""
    return int(meminfo()["MemFree"] * fraction)


def enabled(name: str, default: str) -> bool:
    return os.environ.get(name, default).lower() in ("1", "true", "yes")
