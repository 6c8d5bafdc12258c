"""vLLM's multi-node data parallel, as vLLM 0.32 does it (vllm/engine/arg_utils.py, vllm/v1/engine/utils.py
wait_for_engine_startup, vllm/v1/engine/core.py startup_handshake, vllm/entrypoints/cli/serve.py run_headless).

The front end (the node without --headless) binds its handshake socket on --data-parallel-address and
--data-parallel-rpc-port and waits, with no timeout of its own, until every engine it manages has said HELLO
and then READY; only then does it serve. A --headless node runs its --data-parallel-size-local engines from
--data-parallel-start-rank: each connects to that address (retrying silently, as a ZMQ connect does), says
HELLO, waits at most HANDSHAKE_TIMEOUT_MINS for the front end's answer, loads, says READY. vLLM speaks
msgpack over ZMQ; the stand-in speaks JSON lines over TCP, the same exchange over the same addresses.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass

from . import log
from .config import EngineConfig, env_float

HANDSHAKE_TIMEOUT_MINS = 5  # vllm/v1/engine/core.py: a headless engine waits this long for the front end


class DataParallelError(Exception):
    """What vLLM raises (ValueError or RuntimeError) before its process exits 1."""


@dataclass(frozen=True)
class Layout:
    """The data-parallel mode vLLM's create_engine_config settles on for this process."""

    local: int  # engines this process runs
    start: int  # the first one's data-parallel rank
    local_only: bool  # hybrid or external load balancing: the front end manages its own engines only


def layout(cfg: EngineConfig, is_moe: bool) -> Layout:
    """vLLM's checks and inferences of the data-parallel flags (EngineArgs.create_engine_config)."""
    if cfg.headless and cfg.api_server_count:
        raise DataParallelError(
            f"--api-server-count={cfg.api_server_count} cannot be used with --headless "
            "(no API servers are started in headless mode)."
        )
    if cfg.dp_hybrid_lb and cfg.dp_external_lb:
        raise DataParallelError(
            "Invalid data-parallel launch options: `--data-parallel-hybrid-lb` and `--data-parallel-external-lb` "
            "cannot be enabled together. Enable only one load-balancing mode."
        )
    if cfg.nnodes > 1 and cfg.dp_backend != "mp":
        raise DataParallelError(
            f"Invalid data-parallel launch options: `--nnodes {cfg.nnodes}` requires `--data-parallel-backend mp`; "
            f"got `--data-parallel-backend {cfg.dp_backend}`. Use the MP backend or set `--nnodes 1`."
        )
    external = cfg.dp_external_lb or cfg.dp_rank is not None
    if cfg.dp > 1 and external and not is_moe:
        raise DataParallelError(
            "Non-MoE models do not support external data parallel mode. For external load balancing, launch "
            "independent vLLM instances without --data-parallel-* arguments."
        )
    hybrid = cfg.dp_hybrid_lb
    if external:
        if cfg.dp_local not in (1, None):
            raise DataParallelError(
                "Invalid data-parallel launch options: an external data-parallel rank requires "
                f"`--data-parallel-size-local 1`; got {cfg.dp_local}. Set it to 1 or omit it."
            )
        local, start = 1, cfg.dp_rank or 0
    elif cfg.dp_local is not None:
        local = cfg.dp_local
        if cfg.dp_start_rank is not None and not cfg.headless:
            hybrid = True
        if hybrid and local == 1:
            log.warning(
                "data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1, autoswitch to "
                "data_parallel_external_lb."
            )
            hybrid, external = False, True
        if local == cfg.dp:
            hybrid = False
        start = cfg.dp_start_rank or 0
    else:
        if hybrid:
            raise DataParallelError(
                "Invalid data-parallel launch options: `--data-parallel-hybrid-lb` requires "
                "`--data-parallel-size-local`. Set it to the number of data-parallel ranks on this node."
            )
        local, start = cfg.dp, 0
    if not 0 <= start < cfg.dp:
        raise DataParallelError(f"data_parallel_rank ({start}) must be in the range [0, {cfg.dp})")
    if cfg.headless and local <= 0:
        raise DataParallelError("data_parallel_size_local must be > 0 in headless mode")
    return Layout(local, start, hybrid or external)


def address(cfg: EngineConfig) -> str:
    # Without --data-parallel-address, the mp backend uses --master-addr (ParallelConfig's default 127.0.0.1).
    return cfg.dp_address or cfg.master_addr


def config_hash(cfg: EngineConfig) -> str:
    """ParallelConfig.compute_hash's part that the DP ranks of a MoE model must agree on."""
    fields = {"tp": cfg.tp, "pp": cfg.pp, "dp": cfg.dp, "expert_parallel": cfg.expert_parallel}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _send(sock: socket.socket, message: dict[str, object]) -> None:
    sock.sendall((json.dumps(message) + "\n").encode())


def _receive(reader: object) -> dict[str, object] | None:
    line = reader.readline()  # type: ignore[attr-defined]
    return json.loads(line) if line else None


# --------------------------------------------------------------------------- the front end


def front_end(cfg: EngineConfig, lay: Layout, is_moe: bool) -> None:
    """Bind the handshake socket, wait for every remote engine's HELLO and READY (no timeout), then return."""
    remote = 0 if lay.local_only else cfg.dp - lay.local
    if remote == 0:
        return
    host, port = address(cfg), cfg.dp_rpc_port
    server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host, port))
    except OSError as exc:
        reason = {errno.EADDRNOTAVAIL: "Cannot assign requested address", errno.EADDRINUSE: "Address already in use"}
        raise DataParallelError(
            f"zmq.error.ZMQError: {reason.get(exc.errno or 0, exc.strerror)} (addr='tcp://{host}:{port}')"
        ) from exc
    server.listen(cfg.dp)
    log.info(f"Data parallel: waiting for {remote} remote engine(s) on tcp://{host}:{port}")
    expected = set(range(lay.start + lay.local, cfg.dp)) | set(range(0, lay.start))
    connected: set[int] = set()
    ready: set[int] = set()
    done = threading.Event()
    failure: list[str] = []
    lock = threading.Lock()

    def engine_link(conn: socket.socket) -> None:
        reader = conn.makefile("r", encoding="utf-8")
        hello = _receive(reader)
        if not hello:
            return
        ranks = [int(r) for r in hello.get("ranks", [])]  # type: ignore[attr-defined]
        with lock:
            bad = [r for r in ranks if r not in expected or r in connected]
            if bad:
                failure.append(f"Message from engine with unexpected data parallel rank: {bad[0]}")
            elif not hello.get("headless"):
                failure.append(f"Remote engine {ranks[0]} must use --headless unless in external or hybrid dp lb mode")
            connected.update(ranks)
        if failure:
            done.set()
            return
        _send(conn, {"status": "INIT", "data_parallel_size": cfg.dp, "coordinated": cfg.dp > 1 and is_moe})
        message = _receive(reader)
        if not message or message.get("status") != "READY":
            return  # its engine died while loading: the heartbeat below never starts, the wait goes on
        if cfg.dp > 1 and is_moe and message.get("parallel_config_hash") != config_hash(cfg):
            with lock:
                failure.append(
                    f"Configuration mismatch detected for engine {ranks[0]}. All DP workers must have identical "
                    "configurations for parameters that affect collective communication. Please ensure all "
                    "workers are started with the same command-line arguments."
                )
            done.set()
            return
        with lock:
            ready.update(ranks)
            if ready >= expected:
                done.set()
        # After startup: a remote engine that goes away takes the API down with it, as vLLM's client does.
        if not reader.readline():
            log.error(f"Engine core proc EngineCore_DP{ranks[0]} died unexpectedly, shutting down client.")
            os._exit(1)

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=engine_link, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    debug = os.environ.get("VLLM_LOGGING_LEVEL", "").upper() == "DEBUG"
    while not done.wait(5.0):
        if debug:
            with lock:
                log.log(
                    "DEBUG", f"Waiting for 0 local, {len(expected - connected)} remote core engine proc(s) to connect."
                )
    if failure:
        raise DataParallelError(failure[0])
    log.marker("SPARKC_STANDIN_DATA_PARALLEL", {"role": "front end", "ranks": sorted(ready), "size": cfg.dp})


# --------------------------------------------------------------------------- a headless node


def headless_engines(cfg: EngineConfig, lay: Layout, load: object) -> None:
    """Connect this node's engines to the front end, load, report READY, then stay up."""
    host, port = address(cfg), cfg.dp_rpc_port
    ranks = list(range(lay.start, lay.start + lay.local))
    log.info(
        f"Launching {lay.local} data parallel engine(s) in headless mode, with head node address tcp://{host}:{port}."
    )
    limit = env_float("SPARKC_STANDIN_DP_HANDSHAKE_S", HANDSHAKE_TIMEOUT_MINS * 60.0) or HANDSHAKE_TIMEOUT_MINS * 60.0
    deadline = time.monotonic() + limit
    sock: socket.socket | None = None
    while sock is None:
        try:
            sock = socket.create_connection((host, port), timeout=5.0)
        except OSError:
            if time.monotonic() >= deadline:
                raise DataParallelError(
                    f"Did not receive response from front-end process within {HANDSHAKE_TIMEOUT_MINS} minutes"
                ) from None
            time.sleep(1.0)  # a ZMQ connect retries silently until the peer listens
    sock.settimeout(max(deadline - time.monotonic(), 1.0))
    reader = sock.makefile("r", encoding="utf-8")
    _send(sock, {"status": "HELLO", "ranks": ranks, "headless": True, "local": False})
    try:
        init = _receive(reader)
    except TimeoutError:
        init = None
    if not init or init.get("status") != "INIT":
        raise DataParallelError(
            f"Did not receive response from front-end process within {HANDSHAKE_TIMEOUT_MINS} minutes"
        )
    sock.settimeout(None)
    load()  # type: ignore[operator]
    _send(sock, {"status": "READY", "ranks": ranks, "parallel_config_hash": config_hash(cfg)})
    log.marker("SPARKC_STANDIN_DATA_PARALLEL", {"role": "headless", "ranks": ranks, "front_end": f"{host}:{port}"})
    if init.get("coordinated"):
        # A MoE model's replicas step together: without the front end the engines cannot go on.
        reader.readline()
        log.error("Lost the data parallel front end: the DP group is broken; shutting down.")
        os._exit(1)
    threading.Event().wait()


# --------------------------------------------------------------------------- SGLang's attention data parallel

SGLANG_HANDSHAKE_DELTA = 13  # sglang/srt/server_args.py DP_ATTENTION_HANDSHAKE_PORT_DELTA
SGLANG_RECEIVE_TIMEOUT_S = 600.0  # data_parallel_controller.py _receive_ports_as_client: RCVTIMEO 10 minutes


def sglang_worker_ports(cfg: EngineConfig) -> None:
    """SGLang's DataParallelController with attention DP across nodes: node 0 binds --dist-init-addr's port
    + 13 and hands its scheduler ports to each other node, which connects there (a ZMQ REQ, retrying
    silently) and waits up to 10 minutes for them."""
    host, port = cfg.master_addr, cfg.master_port + SGLANG_HANDSHAKE_DELTA
    if cfg.node_rank == 0:
        server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((host, port))
        except OSError as exc:
            raise DataParallelError(f"zmq.error.ZMQError: {exc.strerror} (addr='tcp://{host}:{port}')") from exc
        server.listen(cfg.nnodes)
        for _ in range(cfg.nnodes - 1):
            conn, _ = server.accept()
            with conn:
                conn.makefile("r", encoding="utf-8").readline()
                _send(conn, {"worker_ports": list(range(cfg.attn_dp))})
        server.close()
        log.marker("SPARKC_STANDIN_ATTENTION_DP", {"role": "node 0", "handshake": f"{host}:{port}"})
        return
    limit = env_float("SPARKC_STANDIN_DP_HANDSHAKE_S", SGLANG_RECEIVE_TIMEOUT_S) or SGLANG_RECEIVE_TIMEOUT_S
    deadline = time.monotonic() + limit
    while True:
        try:
            with socket.create_connection((host, port), timeout=5.0) as conn:
                conn.settimeout(max(deadline - time.monotonic(), 1.0))
                _send(conn, {"node_rank": cfg.node_rank})
                if _receive(conn.makefile("r", encoding="utf-8")):
                    break
        except OSError:
            pass
        if time.monotonic() >= deadline:
            log.error("Timeout waiting for worker ports from node 0")
            raise DataParallelError("Failed to receive worker ports from node 0 within timeout")
        time.sleep(1.0)
    log.marker("SPARKC_STANDIN_ATTENTION_DP", {"role": f"node {cfg.node_rank}", "handshake": f"{host}:{port}"})
