"""``vllm serve MODEL [flags]``: the flags the sparkc test specs use, parsed as strictly as vLLM."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from . import engine, log, speculative
from .config import EngineConfig

VERSION = "0.11.1+sparkc.standin"


def _max_model_len(raw: str) -> int:
    # vLLM accepts human forms such as 32k / 1M as well as plain integers.
    m = re.fullmatch(r"(\d+)([kKmM]?)", raw.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid max_model_len value: {raw!r}")
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1_000_000, "M": 1024 * 1024}[m.group(2)]
    return int(m.group(1)) * scale


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {raw}")
    return value


def _speculative_config(raw: str) -> dict[str, object]:
    # vLLM parses the value as JSON; the config's own fields are judged when the engine config is built.
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON for --speculative-config: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--speculative-config must be a JSON object")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=False)
    p.add_argument("model_tag", nargs="?", default="Qwen/Qwen3-0.6B")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    p.add_argument("--data-parallel-size-local", "-dpl", type=int, default=None)
    p.add_argument("--data-parallel-start-rank", "-dpr", type=int, default=None)
    p.add_argument("--data-parallel-rank", "-dpn", type=int, default=None)
    p.add_argument("--data-parallel-address", "-dpa", default=None)
    p.add_argument("--data-parallel-rpc-port", "-dpp", type=int, default=29550)
    p.add_argument("--data-parallel-backend", "-dpb", default="mp")
    p.add_argument("--data-parallel-hybrid-lb", "-dph", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--data-parallel-external-lb", "-dpe", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--api-server-count", "-asc", type=int, default=None)
    p.add_argument("--enable-expert-parallel", "-ep", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--distributed-executor-backend", choices=["ray", "mp"], default=None)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29501)
    p.add_argument("--headless", action="store_true")
    p.add_argument("--max-model-len", type=_max_model_len, default=None)
    p.add_argument("--gpu-memory-utilization", type=_fraction, default=0.9)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--enable-prefix-caching", action="store_true")  # a real vLLM flag the examples pass
    p.add_argument("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-key", default=None)
    p.add_argument("--speculative-config", "-sc", type=_speculative_config, default=None)
    p.add_argument("--spec-method", choices=sorted(speculative.VLLM_METHODS), default=None)
    p.add_argument("--spec-model", default=None)
    p.add_argument("--spec-tokens", type=int, default=None)
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None)
    return p


def _normalise(args: list[str]) -> list[str]:
    # vLLM's FlexibleArgumentParser accepts --max_model_len as --max-model-len.
    out = []
    for arg in args:
        key, sep, val = arg.partition("=")
        out.append(key.replace("_", "-") + sep + val if arg.startswith("--") else arg)
    return out


def main(argv: list[str]) -> int:
    log.announce_start("vllm", ["vllm", *argv])
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    if argv[:1] != ["serve"]:
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", file=sys.stderr)
        print(
            f"vllm: error: argument subparser: invalid choice: {argv[0]!r}"
            if argv
            else "vllm: error: the following arguments are required: subparser",
            file=sys.stderr,
        )
        return 2
    ns = build_parser().parse_args(_normalise(argv[1:]))  # exits 2 on unknown flags, like vLLM
    if ns.nnodes > 1 and ns.node_rank >= ns.nnodes:
        print(f"vllm serve: error: --node-rank {ns.node_rank} must be < --nnodes {ns.nnodes}", file=sys.stderr)
        return 2
    shorthand = {"method": ns.spec_method, "model": ns.spec_model, "num_speculative_tokens": ns.spec_tokens}
    try:  # EngineArgs.create_engine_config builds the SpeculativeConfig before anything loads
        spec = speculative.vllm(ns.speculative_config, shorthand, ns.model_tag)
    except speculative.SpeculativeError as exc:
        log.error(str(exc))
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
        return 1
    if spec is not None:
        log.marker(speculative.MARKER, {k: spec[k] for k in ("method", "model", "num_speculative_tokens")})
    if ns.kv_cache_memory_bytes is not None and ns.kv_cache_memory_bytes <= 0:
        print("vllm serve: error: kv_cache_memory_bytes must be positive", file=sys.stderr)
        return 2
    if ns.node_rank > 0 and not ns.headless:
        log.warning("--node-rank > 0 without --headless: this rank would also try to serve the API")
    cfg = EngineConfig(
        engine="vllm",
        model=ns.model_tag,
        served_names=tuple(ns.served_model_name or ()),
        host=ns.host or "0.0.0.0",
        port=ns.port,
        tp=ns.tensor_parallel_size,
        pp=ns.pipeline_parallel_size,
        dp=ns.data_parallel_size,
        backend=ns.distributed_executor_backend,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        master_addr=ns.master_addr,
        master_port=ns.master_port,
        headless=ns.headless,
        max_model_len=ns.max_model_len,
        # vLLM's API server: `args.api_key or envs.VLLM_API_KEY` turns on its auth middleware.
        api_key=ns.api_key or os.environ.get("VLLM_API_KEY") or None,
        dp_local=ns.data_parallel_size_local,
        dp_start_rank=ns.data_parallel_start_rank,
        dp_rank=ns.data_parallel_rank,
        dp_address=ns.data_parallel_address,
        dp_rpc_port=ns.data_parallel_rpc_port,
        dp_backend=ns.data_parallel_backend,
        dp_hybrid_lb=ns.data_parallel_hybrid_lb,
        dp_external_lb=ns.data_parallel_external_lb,
        api_server_count=ns.api_server_count,
        expert_parallel=ns.enable_expert_parallel,
        memory_fraction=ns.gpu_memory_utilization,
    )
    return engine.run(cfg)
