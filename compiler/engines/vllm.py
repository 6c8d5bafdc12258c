"""vLLM: `vllm serve MODEL`, multi-node through Ray's executor or its own --nnodes group."""

from __future__ import annotations

import json
from collections.abc import Mapping

from compiler.engines import Deployment, EngineArgv, common_flags, group_args, kv_cache_bytes
from compiler.engines.flag_table import spellings
from compiler.plan import Command, Setting, Words
from compiler.spec.typed import Backend, EngineKind, Node, Source

# The flags sparkc sets, by their long names, and the spec field that controls each.
MANAGED = {
    "--port": "engine.port",
    "--host": "engine.host",
    "--model": "model.mount",
    "--tensor-parallel-size": "engine.tensor_parallel",
    "--pipeline-parallel-size": "engine.pipeline_parallel",
    "--max-model-len": "engine.max_model_len",
    "--gpu-memory-utilization": "engine.gpu_memory_utilization",
    "--served-model-name": "model.name",
    "--trust-remote-code": "engine.trust_remote_code",
    "--reasoning-parser": "engine.reasoning_parser",
    "--distributed-executor-backend": "engine.backend",
    "--nnodes": "cluster.nodes",
    "--node-rank": "cluster.nodes",
    "--master-addr": "cluster.head",
    "--master-port": "launch.master_port",
    "--headless": "engine.backend",
}

# Flags sparkc sets only when the spec field is given; then they are refused in engine.args too.
FIELD = {
    "--speculative-config": "model.draft",
    "--kv-cache-memory-bytes": "engine.kv_cache_memory",
}

# Every spelling vLLM's parser takes for them (`-tp`, `--device-memory-utilization`), from its flag table.
MANAGED_FLAGS, _managed_aliases = spellings(EngineKind.VLLM, MANAGED)
FIELD_FLAGS, _field_aliases = spellings(EngineKind.VLLM, FIELD)
# Other spellings of a flag sparkc passes, as the one sparkc writes.
ALIASES = {**_managed_aliases, **_field_aliases}

SETTING_FLAGS = {
    "host": "--host",
    "port": "--port",
    "max_model_len": "--max-model-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
}


class Vllm:
    kind = EngineKind.VLLM
    name = "vLLM"
    default_port = 8000
    # Variables its Ray executor copies from the head to every worker (by prefix, or the whole name).
    ray_carried_prefixes: tuple[str, ...] = (
        "VLLM_",
        "NCCL_",
        "UCX_",
        "HF_",
        "HUGGING_FACE_",
        "LMCACHE_",
        "PYTHONHASHSEED",
    )
    supports_ray = True
    managed_flags: Mapping[str, str] = MANAGED_FLAGS
    field_flags: Mapping[str, str] = FIELD_FLAGS
    setting_flags: Mapping[str, str] = SETTING_FLAGS
    aliases: Mapping[str, str] = ALIASES
    # Where the engine takes its own start timeout, which the launcher sets from its budget at launch.
    timeout_variable: str | None = "VLLM_ENGINE_READY_TIMEOUT_S"
    timeout_flag: str | None = None
    api_key_variable: str | None = "VLLM_API_KEY"
    # `vllm bench serve` (vllm/benchmarks/serve.py): random prompts, so no data set download; the API key
    # from OPENAI_API_KEY.
    bench_command: tuple[str, ...] = (
        "vllm", "bench", "serve", "--backend", "openai", "--endpoint", "/v1/completions", "--base-url", "@URL@",
        "--model", "@MODEL@", "--tokenizer", "@TOKENIZER@", "--dataset-name", "random",
        "--random-input-len", "@INPUT@", "--random-output-len", "@OUTPUT@", "--num-prompts", "@PROMPTS@",
        "--max-concurrency", "@CONCURRENCY@", "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
        "--save-result", "--result-dir", "@RESULTS@", "--result-filename", "@RESULT@",
    )  # fmt: skip

    def default_backend(self, nodes: int) -> Backend:
        return Backend.RAY if nodes > 1 else Backend.NATIVE

    def canonical(self, flag: str) -> str:
        # vLLM's FlexibleArgumentParser turns `_` into `-` in a long flag's name (up to a `.`).
        if not flag.startswith("--"):
            return flag
        name, dot, rest = flag[2:].partition(".")
        return "--" + name.replace("_", "-") + dot + rest

    def implied_flags(self, d: Deployment) -> dict[str, str]:
        # Without Ray, several GPUs (one node or several) run vLLM's multiprocessing executor.
        implied = {"--model": d.spec.model.mount}  # the positional model, also accepted as --model
        if d.backend is Backend.NATIVE and d.total_gpus > 1:
            implied["--distributed-executor-backend"] = "mp"
        return implied

    def argv(self, d: Deployment, rank: int) -> EngineArgv:
        engine = d.spec.engine
        flags: list[Words] = [
            ("--served-model-name", d.served_model_name),
            ("--host", d.value("host")),
            ("--port", d.value("port")),
            ("--tensor-parallel-size", str(engine.tensor_parallel)),
            ("--pipeline-parallel-size", str(engine.pipeline_parallel)),
        ]
        flags += [(SETTING_FLAGS[s], d.value(s)) for s in ("max_model_len", "gpu_memory_utilization") if d.value(s)]
        if d.backend is Backend.RAY:
            flags.append(("--distributed-executor-backend", "ray"))
        elif d.multi:
            flags += [
                ("--nnodes", str(len(d.nodes))),
                ("--node-rank", str(rank)),
                ("--master-addr", d.head.control_ip),
                ("--master-port", str(d.spec.launch.master_port)),
            ]
            if rank > 0:
                flags.append(("--headless",))
        program = (("vllm",), ("serve",), (d.spec.model.mount,))
        return EngineArgv(program, tuple(flags) + common_flags(d) + self.memory_flags(d), group_args(engine.args))

    def memory_flags(self, d: Deployment) -> Command:
        """The draft model (vLLM reads one JSON object) and the absolute KV-cache budget."""
        flags: list[Words] = []
        draft = d.spec.model.draft
        if draft is not None:
            config = {
                "method": draft.method.value,
                "model": draft.mount,
                "num_speculative_tokens": draft.num_speculative_tokens,
            }
            flags.append(("--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))))
        kv = kv_cache_bytes(d)
        if kv is not None:
            flags.append(("--kv-cache-memory-bytes", str(kv)))
        return tuple(flags)

    def node_env(self, d: Deployment, node: Node) -> tuple[Setting, ...]:
        return (
            Setting(
                "VLLM_HOST_IP",
                node.control_ip,
                Source.DERIVED,
                f"this node's {'control' if node.control else 'fabric'} IP; vLLM otherwise picks the default-route NIC",
            ),
            Setting(
                "VLLM_ENGINE_READY_TIMEOUT_S",
                str(d.engine_timeout),
                Source.DERIVED,
                f"launch.timeout minus {d.engine_timeout_margin}s, so the engine gives up before the launcher",
            ),
        )

    def build_files(self, d: Deployment) -> tuple[tuple[str, str], ...]:
        return ()


VLLM = Vllm()
