"""The run shared by both CLIs: checks, distributed setup, load, then serve or stay headless."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from types import FrameType

from . import data_parallel, dist, log, memory, model, nccl_bootstrap, server
from .config import EngineConfig, env_float, env_int

FAKE_TRACE = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core
    engine_core = EngineCoreProc(*args, **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/abstract.py", line 54, in __init__
    self._init_executor()
  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/base_loader.py", line 56, in load_model
    self.load_weights(model, model_config)
RuntimeError: sparkc-standin: simulated crash while loading weights (SPARKC_STANDIN_CRASH=load)"""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # As PID 1 in a container the default SIGTERM action is ignored; exit like a real server.
    log.info("Shutting down (SIGTERM)")
    sys.stdout.flush()
    os._exit(0)


def _gpus_visible() -> int:
    """GPUs a container was given: docker sets NVIDIA_VISIBLE_DEVICES for ``--gpus``."""
    if os.environ.get("SPARKC_STANDIN_REQUIRE_GPU", "1") == "0":
        return env_int("SPARKC_STANDIN_GPUS_PER_NODE", 1)
    visible = os.environ.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if not visible or visible in ("void", "none"):
        return 0
    return env_int("SPARKC_STANDIN_GPUS_PER_NODE", 1)


def _check_local_gpus(cfg: EngineConfig) -> None:
    # Only for executors that place ranks themselves; under Ray the Ray resources are the GPUs.
    if cfg.world_size % cfg.nnodes != 0:
        raise dist.DistError(
            f"World size (tensor_parallel_size * pipeline_parallel_size = {cfg.world_size}) "
            f"must be divisible by nnodes ({cfg.nnodes})."
        )
    local = cfg.world_size // cfg.nnodes
    have = _gpus_visible()
    if have == 0:
        raise dist.DistError("RuntimeError: No CUDA GPUs are available (was the container started with --gpus?)")
    if local > have:
        raise dist.DistError(
            f"This node needs {local} GPUs for its ranks (world size {cfg.world_size} over "
            f"{cfg.nnodes} node(s)) but has {have}."
        )


def _rendezvous_timeout(cfg: EngineConfig) -> float:
    explicit = env_float("SPARKC_STANDIN_RENDEZVOUS_TIMEOUT_S", None)
    if explicit is not None:
        return explicit
    if cfg.dist_timeout_s is not None:
        return cfg.dist_timeout_s
    return env_float("VLLM_ENGINE_READY_TIMEOUT_S", 600.0) or 600.0


def run(cfg: EngineConfig) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        info = model.inspect_model(cfg.model)
        model.check_layout(info, cfg.tp // cfg.attn_dp)  # attention data parallel splits the heads less
        model.check_experts(info, cfg.ep)
        max_len = model.effective_max_len(info, cfg.max_model_len)
    except model.ModelError as exc:
        log.error(str(exc))
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
        return 1

    if cfg.engine == "vllm" and cfg.memory_fraction is not None:
        # Each `vllm serve` (under Ray: the head's; its Ray workers check their own nodes in vLLM) before
        # anything else starts: Worker.init_device runs request_memory first.
        try:
            requested = memory.vllm_request_memory(cfg.memory_fraction)
        except memory.MemoryError_ as exc:
            log.error("EngineCore failed to start.")
            print(f"ValueError: {exc}", file=sys.stderr, flush=True)
            return 1
        log.info(f"Requested memory {requested / memory.GIB:.2f} GiB (gpu_memory_utilization={cfg.memory_fraction})")
    pre_load_gb = memory.available_gb() if cfg.engine == "sglang" else 0.0

    if cfg.engine == "vllm" and cfg.dp > 1 and cfg.nnodes == 1:
        return _run_data_parallel(cfg, info, max_len)

    try:
        if cfg.backend == "ray":
            dist.ray_setup(cfg)
        else:
            _check_local_gpus(cfg)
            if cfg.nnodes > 1:
                dist.gloo_rendezvous(cfg, _rendezvous_timeout(cfg))
                nccl_bootstrap.bootstrap(cfg.node_rank, cfg.nnodes, _rendezvous_timeout(cfg))
                if cfg.engine == "sglang" and cfg.attn_dp > 1:
                    data_parallel.sglang_worker_ports(cfg)
    except (dist.DistError, data_parallel.DataParallelError) as exc:
        log.error(str(exc))
        traceback.print_exc()
        return 1

    rank0 = cfg.node_rank == 0
    if not _load(cfg, max_len):
        return 1
    if cfg.engine == "sglang" and cfg.memory_fraction is not None:
        try:  # ModelRunner.init_memory_pool, after the weights loaded
            rest = memory.sglang_memory_pool(
                pre_load_gb, memory.weights_gb(cfg.model, cfg.world_size), cfg.memory_fraction
            )
        except memory.MemoryError_ as exc:
            log.error(str(exc))
            print(f"RuntimeError: {exc}", file=sys.stderr, flush=True)
            return 1
        log.info(f"KV cache pool: {rest:.2f} GB (mem_fraction_static={cfg.memory_fraction})")
    if cfg.backend != "ray" and cfg.nnodes > 1:
        try:
            dist.loaded_everywhere()
        except dist.DistError as exc:
            log.error(str(exc))
            return 1
    return _serve(cfg, max_len, rank0)


def _load(cfg: EngineConfig, max_len: int) -> bool:
    log.info(f"Loading weights from {cfg.model} (max_model_len={max_len})")
    load_s = env_float("SPARKC_STANDIN_LOAD_SECONDS", 0.0) or 0.0
    if load_s > 0:
        time.sleep(load_s)
    if os.environ.get("SPARKC_STANDIN_CRASH", "") == "load":
        log.error("EngineCore failed to start.")
        print(FAKE_TRACE, file=sys.stderr, flush=True)
        return False
    log.info(f"Model loading took {load_s:.2f} s")
    return True


def _run_data_parallel(cfg: EngineConfig, info: model.ModelInfo, max_len: int) -> int:
    """vLLM's data parallel in its own (mp) mode: the front end waits for every engine, a headless node
    connects its engines to it (standin/data_parallel.py)."""
    try:
        if cfg.dp_backend != "mp":
            raise data_parallel.DataParallelError(
                "the stand-in models vLLM's mp data-parallel backend only"
                if cfg.dp_backend == "ray"
                else f"data_parallel_backend can only be ray or mp, got {cfg.dp_backend}"
            )
        lay = data_parallel.layout(cfg, info.is_moe)
        need, have = lay.local * cfg.world_size, _gpus_visible()
        if need > have:
            raise data_parallel.DataParallelError(
                f"{lay.local} data-parallel engine(s) of tensor_parallel_size x pipeline_parallel_size = "
                f"{cfg.world_size} need {need} GPUs on this node, but it has {have}."
            )
        if cfg.headless:

            def load() -> None:
                if not _load(cfg, max_len):
                    os._exit(1)

            data_parallel.headless_engines(cfg, lay, load)
            return 0
        if not _load(cfg, max_len):
            return 1
        data_parallel.front_end(cfg, lay, info.is_moe)
    except data_parallel.DataParallelError as exc:
        log.error(str(exc))
        print(f"RuntimeError: {exc}", file=sys.stderr, flush=True)
        return 1
    return _serve(cfg, max_len, True)


def _serve(cfg: EngineConfig, max_len: int, rank0: bool) -> int:
    serve_http = rank0 and not cfg.headless
    health_only = cfg.engine == "sglang" and not rank0
    if not (serve_http or health_only):
        log.info(f"Headless rank {cfg.node_rank}: no API server on this node; staying up")
        threading.Event().wait()
        return 0

    names = cfg.served_names or (cfg.model,)
    try:
        httpd = server.bind(
            cfg.host,
            cfg.port,
            server.ServeInfo(
                cfg.engine,
                cfg.model,
                names,
                max_len,
                health_only=health_only,
                api_key=cfg.api_key,
                engines=cfg.dp if cfg.engine == "vllm" else 1,
                metrics=cfg.metrics,
            ),
        )
    except OSError as exc:
        # uvicorn's wording, lower-cased as uvicorn prints it
        reason = (exc.strerror or str(exc)).lower()
        log.error(f"[Errno {exc.errno}] error while attempting to bind on address ({cfg.host!r}, {cfg.port}): {reason}")
        return 1
    log.info(f"Starting {cfg.engine} API server on http://{cfg.host}:{cfg.port}")
    log.marker(
        "SPARKC_STANDIN_READY",
        {
            "host": cfg.host,
            "port": cfg.port,
            "served": list(names),
            "max_model_len": max_len,
            "rank": cfg.node_rank,
            "health_only": health_only,
        },
    )
    httpd.serve_forever()
    return 0
