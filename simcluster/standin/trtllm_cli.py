"""``trtllm-serve MODEL [options]`` and ``trtllm-llmapi-launch COMMAND...``, as TensorRT-LLM's.

trtllm-serve is a click command (tensorrt_llm/commands/serve.py): options spelt with underscores, no
abbreviations, an unknown option is click's "No such option" and exit 2; a first word that is no subcommand
runs ``serve``. Its checks, in the order the real one makes them: no GPU at all ("No GPU devices found on
the node", get_llm_args), fewer GPUs on the node than its share of TP x PP ("Only N GPUs are available, but W
are required.", the LLM API), and under trtllm-llmapi-launch an MPI world smaller than TP x PP ("Cannot
instantiate Generator for engine built for W ranks, while currently running on N ranks.", the executor).
A local folder is served under the folder's name (openai_server.py: ``model_dir.name``).

trtllm-llmapi-launch (tensorrt_llm/llmapi/trtllm-llmapi-launch) reads its rank from OMPI_COMM_WORLD_RANK: rank 0
runs the command with the MPI variables removed and ``tllm_mpi_size`` set, the other ranks serve as its MPI
workers. Here every rank first meets the others (a gloo all_reduce at MASTER_ADDR:MASTER_PORT standing for the
MPI communicator the real workers join), then a heartbeat makes every rank exit when one dies, so mpirun ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from . import dist, engine, log, model, server
from .config import EngineConfig, env_int

# Variables trtllm-llmapi-launch removes before rank 0 starts the server (its mpi_blacklist).
MPI_PREFIXES = (
    "OMPI_",
    "PMIX_",
    "PMI_",
    "SLURM_",
    "MPI_",
    "UCX_",
    "I_MPI_",
    "HYDRA_",
    "KMP_",
    "MPICH_",
    "MV2_",
    "CRAY_",
)
BACKENDS = ("pytorch", "tensorrt", "_autodeploy", "trt")
LOG_LEVELS = ("internal_error", "error", "warning", "info", "verbose", "debug", "trace")


class _DefaultGroup(click.Group):
    """trtllm-serve's DefaultGroup: a first word that names no subcommand runs `serve`."""

    def resolve_command(self, ctx: click.Context, args: list[str]):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands:
            return "serve", self.commands["serve"], args
        return super().resolve_command(ctx, args)


def _fail(message: str) -> None:
    log.error(message)
    print(f"RuntimeError: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


@click.command("serve")
@click.argument("model_path", metavar="MODEL", type=str)
@click.option("--tokenizer", type=str, default=None)
@click.option("--custom_tokenizer", type=str, default=None)
@click.option("--host", type=str, default="localhost")
@click.option("--port", type=int, default=8000)
@click.option("--backend", type=click.Choice(BACKENDS), default="pytorch")
@click.option("--custom_module_dirs", type=str, multiple=True)
@click.option("--log_level", type=click.Choice(LOG_LEVELS), default="info")
@click.option("--max_beam_width", type=int, default=1)
@click.option("--max_batch_size", type=int, default=2048)
@click.option("--max_num_tokens", type=int, default=8192)
@click.option("--max_seq_len", type=int, default=None)
@click.option("--tensor_parallel_size", "--tp_size", "tp", type=int, default=1)
@click.option("--pipeline_parallel_size", "--pp_size", "pp", type=int, default=1)
@click.option("--context_parallel_size", "--cp_size", type=int, default=1)
@click.option("--moe_expert_parallel_size", "--ep_size", type=int, default=None)
@click.option("--moe_cluster_parallel_size", "--cluster_size", type=int, default=None)
@click.option("--gpus_per_node", type=int, default=None)
@click.option("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction", type=float, default=0.9)
@click.option("--num_postprocess_workers", type=int, default=0)
@click.option("--trust_remote_code", is_flag=True, default=False)
@click.option("--revision", type=str, default=None)
@click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str, default=None)
@click.option("--reasoning_parser", type=str, default=None)
@click.option("--tool_parser", type=str, default=None)
@click.option("--metadata_server_config_file", type=str, default=None)
@click.option("--server_role", type=str, default=None)
@click.option("--fail_fast_on_attention_window_too_large", is_flag=True, default=False)
@click.option("--otlp_traces_endpoint", type=str, default=None)
@click.option("--disagg_cluster_uri", type=str, default=None)
@click.option("--enable_chunked_prefill", is_flag=True, default=False)
@click.option("--media_io_kwargs", type=str, default=None)
@click.option("--chat_template", type=str, default=None)
def serve(model_path: str, host: str, port: int, tp: int, pp: int, max_seq_len: int | None, **options: object) -> None:
    """Running an OpenAI API compatible server (stand-in)."""
    if options["extra_llm_api_options"] is not None:
        _read_options(str(options["extra_llm_api_options"]))
    try:
        info = model.inspect_model(model_path)
        model.check_layout(info, tp)
        max_len = model.effective_max_len(info, max_seq_len)
    except model.ModelError as exc:
        _fail(str(exc))
    world = tp * pp
    gpus = _container_gpus()
    if gpus == 0:
        log.error("No GPU devices found on the node")
        print("ValueError: No GPU devices found on the node", file=sys.stderr, flush=True)
        raise SystemExit(1)
    per_node = min(world, int(options["gpus_per_node"] or gpus))  # type: ignore[call-overload]
    if world > 1 and gpus < per_node:
        _fail(f"Only {gpus} GPUs are available, but {world} are required.")
    if world > 1:
        spawned = os.environ.get("TLLM_SPAWN_PROXY_PROCESS") == "1"
        size = env_int("tllm_mpi_size", 1) if spawned else 1
        if size < world:
            _fail(
                f"Cannot instantiate Generator for engine built for {world} ranks, while currently running on "
                f"{size} ranks."
            )
        log.info(f"start MpiSession with {world} workers")
    folder = Path(model_path)
    name = folder.name if folder.is_dir() else model_path
    log.info(f"Loading {model_path} (max_seq_len={max_len}, tp_size={tp}, pp_size={pp})")
    try:
        httpd = server.bind(host, port, server.ServeInfo("trtllm", model_path, (name,), max_len))
    except OSError as exc:
        _fail(f"Failed to bind socket to {host}:{port}: {exc}")
    log.info(f"Started server process; Uvicorn running on http://{host}:{port}")
    log.marker("SPARKC_STANDIN_READY", {"host": host, "port": port, "served": [name], "max_model_len": max_len})
    httpd.serve_forever()


def _container_gpus() -> int:
    """The GPUs docker gave the container: --gpus sets NVIDIA_VISIBLE_DEVICES for its first process only,
    but the devices are there for every process in it (mpirun's, started by docker exec on the head); the
    simulated cluster's NVIDIA hook records them in /etc/sparkc-sim/gpus as the real one mounts devices."""
    if "NVIDIA_VISIBLE_DEVICES" not in os.environ:
        try:
            os.environ["NVIDIA_VISIBLE_DEVICES"] = Path("/etc/sparkc-sim/gpus").read_text().strip()
        except OSError:
            pass
    return engine._gpus_visible()  # the stand-in's one notion of a node's GPUs


def _read_options(path: str) -> None:
    """trtllm-serve opens the file at once (yaml.safe_load); a missing one is its FileNotFoundError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"FileNotFoundError: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    log.marker("SPARKC_STANDIN_LLM_API_OPTIONS", {"path": path, "text": text})


main_group = _DefaultGroup(commands={"serve": serve})


def serve_main(argv: list[str]) -> int:
    log.announce_start("trtllm", ["trtllm-serve", *argv])
    try:
        main_group.main(args=argv, prog_name="trtllm-serve", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def launch_main(argv: list[str]) -> int:
    """trtllm-llmapi-launch: rank 0 runs the command, the others are its MPI workers."""
    log.announce_start("trtllm", ["trtllm-llmapi-launch", *argv])  # each rank's own environment, in mpirun's output
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or 0)
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or 1)
    print(f"mpi_rank: {rank}", file=sys.stderr, flush=True)
    print(f"tllm_mpi_size: {size}", file=sys.stderr, flush=True)
    if size > 1:
        cfg = EngineConfig(
            engine="trtllm",
            model="",
            served_names=(),
            host="",
            port=0,
            nnodes=size,
            node_rank=rank,
            master_addr=os.environ.get("MASTER_ADDR", "127.0.0.1"),
            master_port=env_int("MASTER_PORT", 29501),
        )
        try:
            dist.gloo_rendezvous(cfg, float(env_int("SPARKC_STANDIN_RENDEZVOUS_TIMEOUT_S", 120)))
            dist.loaded_everywhere()  # then a heartbeat: every rank exits when one dies
        except dist.DistError as exc:
            log.error(str(exc))
            return 1
    if rank != 0:
        print(f"rank{rank} run mgmn worker node with mpi_world_size: {size} ...", file=sys.stderr, flush=True)
        log.marker("SPARKC_STANDIN_MPI_WORKER", {"rank": rank, "size": size, "hostname": os.uname().nodename})
        import threading

        threading.Event().wait()
        return 0
    print(f"rank0 run {' '.join(argv)} in background", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_PREFIXES)}
    env.update(TLLM_SPAWN_PROXY_PROCESS="1", tllm_mpi_size=str(size))
    return subprocess.call(argv, env=env)
