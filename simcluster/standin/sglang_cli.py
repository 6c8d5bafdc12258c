"""``python3 -m sglang.launch_server [flags]``: SGLang's vocabulary and defaults."""

from __future__ import annotations

import argparse
import sys

from . import engine, log, speculative
from .config import EngineConfig


def _addr(raw: str) -> tuple[str, int]:
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {raw!r}")
    return host, int(port)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_server.py", allow_abbrev=False)
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tensor-parallel-size", "--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "--pp-size", dest="pp_size", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    p.add_argument("--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1)
    p.add_argument("--enable-dp-attention", action="store_true")  # deprecated in 0.5.23: --attn-dp-size
    p.add_argument("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", type=_addr, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--dist-timeout", type=int, default=None)
    p.add_argument("--enable-metrics", action="store_true")  # without it the server has no /metrics
    p.add_argument("--api-key", default=None)  # SGLang reads its key only from the command line
    p.add_argument("--speculative-algorithm", default=None)  # any name: judged by SpeculativeAlgorithm.from_string
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    return p


def _parallel_problem(ns: argparse.Namespace) -> str:
    """SGLang 0.5.23's checks of its data- and expert-parallel widths (sglang/srt/arg_groups/parallel_hook.py,
    runtime_context.py): attention DP and expert parallel divide the tensor-parallel group."""
    if ns.enable_dp_attention:
        log.warning("--enable-dp-attention is deprecated. Use --attn-dp-size <dp-size> instead.")
        if ns.attn_dp_size == 1:
            ns.attn_dp_size, ns.dp_size = ns.dp_size, 1
    if ns.attn_dp_size < 1:
        return f"--attn-dp-size must be positive (got {ns.attn_dp_size})."
    if ns.attn_dp_size > 1 and ns.dp_size > 1:
        return (
            f"--dp-size {ns.dp_size} with --attn-dp-size {ns.attn_dp_size}: data-parallel replicas combined with "
            "attention data parallelism are not supported."
        )
    if ns.tp_size % ns.attn_dp_size:
        return f"tp_size ({ns.tp_size}) must be divisible by attn_dp_size ({ns.attn_dp_size})"
    if ns.ep_size < 1 or ns.tp_size % ns.ep_size:
        return f"tp_size == moe_ep_size * moe_dp_size * moe_tp_size: {ns.tp_size} is not a multiple of {ns.ep_size}"
    return ""


def main(argv: list[str]) -> int:
    log.announce_start("sglang", ["python3", "-m", "sglang.launch_server", *argv])
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.nnodes > 1 and ns.dist_init_addr is None:
        parser.error("--dist-init-addr is required when --nnodes > 1")
    try:  # ServerArgs.__post_init__ runs handle_speculative_decoding before anything loads
        spec = speculative.sglang(
            ns.speculative_algorithm,
            ns.speculative_draft_model_path,
            ns.speculative_num_steps,
            ns.speculative_eagle_topk,
            ns.speculative_num_draft_tokens,
            ns.model_path,
        )
    except speculative.SpeculativeError as exc:
        log.error(str(exc))
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
        return 1
    if spec is not None:
        log.marker(speculative.MARKER, spec)
    problem = _parallel_problem(ns)
    if problem:
        log.error(problem)
        print(f"ValueError: {problem}", file=sys.stderr, flush=True)
        return 1
    master_addr, master_port = ns.dist_init_addr or ("127.0.0.1", 5000)
    cfg = EngineConfig(
        engine="sglang",
        model=ns.model_path,
        served_names=(ns.served_model_name,) if ns.served_model_name else (),
        host=ns.host,
        port=ns.port,
        tp=ns.tp_size,
        pp=ns.pp_size,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        master_addr=master_addr,
        master_port=master_port,
        max_model_len=ns.context_length,
        dist_timeout_s=float(ns.dist_timeout) if ns.dist_timeout else None,
        api_key=ns.api_key,
        metrics=ns.enable_metrics,
        attn_dp=ns.attn_dp_size,
        ep=ns.ep_size,
        memory_fraction=ns.mem_fraction_static,
    )
    return engine.run(cfg)
