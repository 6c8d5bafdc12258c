"""What both CLIs parse into: one engine-neutral description of the run."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineConfig:
    engine: str  # "vllm" or "sglang"
    model: str
    served_names: tuple[str, ...]
    host: str
    port: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    backend: str | None = None  # vLLM --distributed-executor-backend
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29501
    headless: bool = False
    max_model_len: int | None = None
    dist_timeout_s: float | None = None
    api_key: str | None = None  # /v1/* then answers 401 without `Authorization: Bearer KEY`
    # vLLM's data parallel (--data-parallel-*) and expert parallel
    dp_local: int | None = None
    dp_start_rank: int | None = None
    dp_rank: int | None = None
    dp_address: str | None = None
    dp_rpc_port: int = 29550
    dp_backend: str = "mp"
    dp_hybrid_lb: bool = False
    dp_external_lb: bool = False
    api_server_count: int | None = None
    expert_parallel: bool = False
    # SGLang: attention data parallel and expert parallel inside the tensor-parallel group
    attn_dp: int = 1
    ep: int = 1
    # vLLM --gpu-memory-utilization (share of the total it checks is free at start), SGLang --mem-fraction-static
    # (share of what is free at start); None: the engine's own choice
    memory_fraction: float | None = None
    metrics: bool = True  # /metrics served: vLLM always, SGLang under --enable-metrics

    @property
    def world_size(self) -> int:
        return self.tp * self.pp


def env_float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        return default


def env_int(name: str, default: int) -> int:
    value = env_float(name, float(default))
    return int(value) if value is not None else default
