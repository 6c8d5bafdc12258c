"""The distributed part, done for real: a Ray placement group, or a gloo rendezvous."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any, NoReturn

from . import log
from .config import EngineConfig, env_float

HEARTBEAT_S = 5.0


class DistError(Exception):
    """A failure the engine reports before exiting 1."""


# --------------------------------------------------------------------------- Ray (vLLM executor)


# What vLLM's Ray executor copies from the driver's environment to every Ray worker before the
# model loads (vllm/ray/ray_env.py, since vLLM PR 34383): these prefixes and names, minus the
# worker-specific ones and those listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json.
CARRIED_PREFIXES = ("VLLM_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_")
CARRIED_NAMES = {"PYTHONHASHSEED"}
WORKER_SPECIFIC = {"VLLM_HOST_IP", "VLLM_HOST_PORT", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES"}


def _non_carry_over() -> set[str]:
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    root = os.path.expanduser(os.environ.get("VLLM_CONFIG_ROOT", os.path.join(config_home, "vllm")))
    path = os.path.join(root, "ray_non_carry_over_env_vars.json")
    try:
        with open(path, encoding="utf-8") as fh:
            names = set(json.load(fh))
    except FileNotFoundError:
        return set()
    except json.JSONDecodeError:
        log.warning(f"Failed to parse {path}. Using an empty set for non-carry-over env vars.")
        return set()
    log.info(f"RAY_NON_CARRY_OVER_ENV_VARS from config: {sorted(names)}")
    return names


def carried_env() -> dict[str, str]:
    """The driver's variables its Ray executor sets on every worker."""
    skip = WORKER_SPECIFIC | _non_carry_over()
    names = {k for k in os.environ if k.startswith(CARRIED_PREFIXES) or k in CARRIED_NAMES}
    return {k: os.environ[k] for k in sorted(names - skip)}


def _report_node(carried: dict[str, str]) -> dict[str, Any]:
    # Runs in a Ray worker inside a bundle: takes the driver's variables as vLLM's worker wrapper
    # does (update_environment_variables), then says where it landed and what env it runs with.
    import ray

    os.environ.update(carried)
    keys = [k for k in os.environ if k.startswith(("NCCL_", "GLOO_", "VLLM_", "UCX_", "HF_", "RAY_NODE", "CUDA_"))]
    return {
        "hostname": socket.gethostname(),
        "node_ip": ray.util.get_node_ip_address(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "env": {k: os.environ[k] for k in sorted(keys)},
    }


def ray_setup(cfg: EngineConfig) -> None:
    """What vLLM's Ray executor does before loading: find GPUs, reserve them, start one worker each."""
    if _image_marker() == "vllm-noray":
        raise DistError("Failed to import Ray: No module named 'ray'. Please install Ray with `pip install ray`.")
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    need = cfg.world_size
    log.info(f"Connecting to existing Ray cluster (address=auto), need {need} GPUs")
    try:
        ray.init(address="auto", logging_level="WARNING", log_to_driver=False)
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, ...
        raise DistError(f"Could not connect to a running Ray cluster: {exc}") from exc

    gpu_wait = env_float("SPARKC_STANDIN_RAY_GPU_WAIT_S", 30.0) or 0.0
    deadline = time.monotonic() + gpu_wait
    total = 0.0
    while True:
        total = ray.cluster_resources().get("GPU", 0.0)
        if total >= need or time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    if total < need:
        raise DistError(
            "The number of required GPUs exceeds the total number of available GPUs in the "
            f"placement group. Required number of devices: {need}. Total number of devices: {int(total)}."
        )

    # vLLM pins bundle 0 to the driver's node by VLLM_HOST_IP: if that is not the IP Ray knows the
    # node by, the group can never be placed.
    driver_ip = os.environ.get("VLLM_HOST_IP") or ray.util.get_node_ip_address()
    bundles: list[dict[str, float]] = [{"GPU": 1.0} for _ in range(need)]
    bundles[0][f"node:{driver_ip}"] = 0.001
    pg = placement_group(bundles, strategy="PACK")
    timeout = env_float("VLLM_ENGINE_READY_TIMEOUT_S", 600.0) or 600.0
    start = time.monotonic()
    ready_ref = pg.ready()
    while True:
        done, _ = ray.wait([ready_ref], timeout=min(10.0, timeout))
        if done:
            break
        waited = time.monotonic() - start
        if waited >= timeout:
            raise DistError(
                f"Cannot provide a placement group of placement_group_specs={bundles} within "
                f"{int(timeout)} seconds. See `ray status` and `ray list nodes` to make sure the "
                "cluster has enough resources."
            )
        log.info(f"Waiting for creating a placement group of specs for {int(waited)} seconds. specs={bundles}")

    remote = ray.remote(_report_node)
    carried = carried_env()
    log.info(f"Copying the following environment variables to workers: {sorted(carried)}")
    refs = [
        remote.options(
            num_cpus=0,
            num_gpus=1,
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i),
        ).remote(carried)
        for i in range(need)
    ]
    results = ray.get(refs, timeout=timeout)
    for i, res in enumerate(results):
        log.marker("SPARKC_STANDIN_RAY_WORKER", {"bundle": i, **res})
    ips = sorted({r["node_ip"] for r in results})
    log.info(f"Ray workers ready on {len(ips)} node(s): {', '.join(ips)}")
    _start_daemon(_watch_ray_nodes, pg)


def _watch_ray_nodes(pg: Any) -> None:
    # Real vLLM dies when a Ray worker node goes away; so does the stand-in.
    import ray
    from ray.util.placement_group import placement_group_table

    node_ids = set(placement_group_table(pg).get("bundles_to_node_id", {}).values())
    while True:
        time.sleep(HEARTBEAT_S)
        try:
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        except Exception as exc:
            _die(f"Lost the Ray cluster: {exc}")
        dead = node_ids - alive
        if dead:
            _die(f"Ray worker node(s) died: {sorted(dead)}")


def _image_marker() -> str:
    try:
        with open("/etc/sparkc-sim/image", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------- gloo (native multi-node)


def gloo_rendezvous(cfg: EngineConfig, timeout_s: float) -> None:
    """torch.distributed over gloo, honouring GLOO_SOCKET_IFNAME as real engines do."""
    import torch
    import torch.distributed as dist

    url = f"tcp://{cfg.master_addr}:{cfg.master_port}"
    ifname = os.environ.get("GLOO_SOCKET_IFNAME", "")
    log.info(
        f"Rendezvous {url} world_size={cfg.nnodes} rank={cfg.node_rank} "
        f"GLOO_SOCKET_IFNAME={ifname or '(unset)'} timeout={int(timeout_s)}s"
    )
    start = time.monotonic()
    try:
        dist.init_process_group(
            "gloo",
            init_method=url,
            world_size=cfg.nnodes,
            rank=cfg.node_rank,
            timeout=timedelta(seconds=timeout_s),
        )
        value = torch.tensor([float(cfg.node_rank + 1)])
        dist.all_reduce(value)
    except Exception as exc:
        raise DistError(f"torch.distributed rendezvous at {url} failed: {exc}") from exc
    expected = cfg.nnodes * (cfg.nnodes + 1) / 2
    if float(value.item()) != expected:
        raise DistError(f"all_reduce gave {value.item()}, expected {expected}")
    log.marker(
        "SPARKC_STANDIN_RENDEZVOUS",
        {
            "ok": True,
            "world_size": cfg.nnodes,
            "rank": cfg.node_rank,
            "sum": float(value.item()),
            "ifname": ifname,
            "seconds": round(time.monotonic() - start, 2),
        },
    )
    if cfg.engine == "sglang":
        _sglang_memory_balance(cfg)


def loaded_everywhere() -> None:
    """After the weights load: every rank reports in before any serves (a real engine's head waits for
    its workers' ready messages, so a rank that died while loading fails the head too); then the
    heartbeat watches the peers."""
    import torch
    import torch.distributed as dist

    try:
        dist.all_reduce(torch.tensor([1.0]))
    except Exception as exc:
        raise DistError(f"a peer rank did not finish loading: {exc}") from exc
    _start_daemon(_heartbeat)


def _sglang_memory_balance(cfg: EngineConfig) -> None:
    """SGLang's model runner compares each rank's free GPU memory with the smallest across the group
    and refuses to start when it is below 0.9x its own (page cache on unified memory makes this
    common on Sparks) unless the check is switched off: SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=1 in
    older releases, SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 in newer ones. The free memory is the
    node's MemAvailable, as SGLang reads it on GB10 (SPARKC_STANDIN_FREE_MEMORY_GB wins where set)."""
    import torch
    import torch.distributed as dist

    from .memory import available_gb

    local = available_gb()
    smallest = torch.tensor([local])
    dist.all_reduce(smallest, op=dist.ReduceOp.MIN)
    lowest = float(smallest.item())
    if lowest >= local * 0.9:
        return
    disabled = os.environ.get("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "").lower() in ("1", "true", "yes")
    enabled = os.environ.get("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", "true").lower() in ("1", "true", "yes")
    if disabled or not enabled:
        log.warning(f"The memory capacity is unbalanced (min {lowest:.1f} GB, local {local:.1f} GB); check disabled")
        return
    raise DistError(
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        f"min_per_gpu_memory={lowest:.2f}, local_gpu_memory={local:.2f}, local_gpu_memory * 0.9={local * 0.9:.2f}"
    )


def _heartbeat() -> None:
    # Every rank does the same all_reduce on the same beat, so if one rank dies the others notice
    # and exit, like real engine workers do.
    import torch
    import torch.distributed as dist

    while True:
        time.sleep(HEARTBEAT_S)
        try:
            dist.all_reduce(torch.tensor([1.0]))
        except Exception as exc:
            _die(f"Lost a peer rank: {exc}")


# --------------------------------------------------------------------------- helpers


def _start_daemon(target: Any, *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def _die(msg: str) -> NoReturn:
    log.error(msg)
    os._exit(1)
