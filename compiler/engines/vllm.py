"""vLLM: `vllm serve MODEL`, multi-node through Ray's executor or its own --nnodes group."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compiler.engines import (
    Deployment,
    EngineArgv,
    RecipeWords,
    common_flags,
    data_parallel_shares,
    group_args,
    kv_cache_bytes,
)
from compiler.engines.flag_table import spellings
from compiler.engines.memory import kv_fraction, vllm_gate
from compiler.engines.speculative import VLLM_MTP_NAMES, engine_name
from compiler.plan import Command, EngineMetrics, Setting, StartGate, Words
from compiler.sizes import size_bytes
from compiler.spec.model_facts import ModelFacts
from compiler.spec.typed import Backend, EngineKind, Node, Source, Spec
from compiler.user_files import BadJson, ascii_int, loads_json

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
    # Data parallel: the replicas, each node's share of them and where they reach the head; the load-balancing
    # modes that would move the API off the head (external, hybrid) and Ray's placement are not the plan's.
    "--data-parallel-size": "engine.data_parallel",
    "--data-parallel-size-local": "engine.data_parallel",
    "--data-parallel-start-rank": "engine.data_parallel",
    "--data-parallel-rank": "engine.data_parallel",
    "--data-parallel-hybrid-lb": "engine.data_parallel",
    "--data-parallel-external-lb": "engine.data_parallel",
    "--data-parallel-multi-port-external-lb": "engine.data_parallel",
    "--data-parallel-address": "cluster.head",
    "--data-parallel-rpc-port": "launch.data_parallel_rpc_port",
    "--data-parallel-backend": "engine.backend",
    "--enable-expert-parallel": "engine.expert_parallel",
}

# Flags sparkc sets only when the spec field is given; then they are refused in engine.args too.
FIELD = {
    "--speculative-config": "model.draft",
    # vLLM's shorthand for keys of the same config (EngineArgs.create_speculative_config merges them, and
    # refuses one the config also sets).
    "--spec-method": "model.draft",
    "--spec-model": "model.draft",
    "--spec-tokens": "model.draft",
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
    # Data parallel (docs: data_parallel_deployment): --data-parallel-size-local replicas on each node, which
    # reach the head on its RPC port.
    replicas_whole_per_node = True
    dp_handshake_offset: int | None = None
    experts_evenly = False  # the first ranks get one expert more
    kv_budget_refusal: str | None = None
    memory_chosen_at_start: str | None = None  # without a fraction: its default, VLLM_DEFAULT_FRACTION
    ranks_answer_health = False
    # ModelConfig: "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1".
    context_fits_memory: str | None = "auto"  # --max-model-len auto
    allow_longer_variable: str | None = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    supports_mpi = False
    serves_folder_name = False
    aliases_refusal: str | None = None  # --served-model-name takes several names (nargs="+")
    drafts_from_spec = True
    takes_llm_api_options = False
    recipe_words: RecipeWords | None = RecipeWords(
        program="vllm serve",
        default_flags={
            "port": "--port",
            "host": "--host",
            "tensor_parallel": "--tensor-parallel-size",
            "pipeline_parallel": "--pipeline-parallel-size",
            "gpu_memory_utilization": "--gpu-memory-utilization",
            "max_model_len": "--max-model-len",
            "max_num_batched_tokens": "--max-num-batched-tokens",
            "max_num_seqs": "--max-num-seqs",
            "served_model_name": "--served-model-name",
            "dtype": "--dtype",
            "quantization": "--quantization",
            "kv_cache_dtype": "--kv-cache-dtype",
            "distributed_executor_backend": "--distributed-executor-backend",
        },
        default_switches={
            "enforce_eager": "--enforce-eager",
            "enable_prefix_caching": "--enable-prefix-caching",
            "trust_remote_code": "--trust-remote-code",
            "enable_auto_tool_choice": "--enable-auto-tool-choice",
        },
        speculative_flags=("--speculative-config", "--spec-method", "--spec-model", "--spec-tokens"),
        replica_fields={
            "--data-parallel-size": "engine.data_parallel",
            "--enable-expert-parallel": "engine.expert_parallel",
        },
    )
    # vllm/v1/metrics/loggers.py: gauges and counters labelled model_name and engine (one per data-parallel
    # engine); kv_cache_usage_perc (a fraction, despite its name) replaced gpu_cache_usage_perc.
    metrics: EngineMetrics | None = EngineMetrics(
        running="vllm:num_requests_running",
        waiting="vllm:num_requests_waiting",
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        prompt_tokens="vllm:prompt_tokens_total",
        generation_tokens="vllm:generation_tokens_total",
    )
    metrics_absent = ""
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
        engine = d.spec.engine
        if d.backend is Backend.NATIVE and engine.tensor_parallel * engine.pipeline_parallel > 1:
            implied["--distributed-executor-backend"] = "mp"
        return implied

    def argv(self, d: Deployment, rank: int) -> EngineArgv:
        engine = d.spec.engine
        flags: list[Words] = [
            ("--served-model-name", d.served_model_name, *d.spec.model.aliases),
            ("--host", d.value("host")),
            ("--port", d.value("port")),
            ("--tensor-parallel-size", str(engine.tensor_parallel)),
            ("--pipeline-parallel-size", str(engine.pipeline_parallel)),
        ]
        flags += [(SETTING_FLAGS[s], d.value(s)) for s in ("max_model_len", "gpu_memory_utilization") if d.value(s)]
        if engine.data_parallel > 1:
            flags += self.data_parallel_flags(d, rank)
        elif d.backend is Backend.RAY:
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
        if engine.expert_parallel:
            flags.append(("--enable-expert-parallel",))
        program = (("vllm",), ("serve",), (d.spec.model.mount,))
        return EngineArgv(program, tuple(flags) + common_flags(d) + self.memory_flags(d), group_args(engine.args))

    def data_parallel_flags(self, d: Deployment, rank: int) -> Command:
        """vLLM's multi-node data parallel (docs: data_parallel_deployment): every node runs its share of the
        replicas; the head serves the API and waits for every other node's engines to connect to its RPC
        port; the others run --headless from their first rank. The head gets no start rank: with one, vLLM
        would switch to its hybrid load balancing, which serves the API on every node."""
        share = data_parallel_shares(d)[rank]
        flags: list[Words] = [
            ("--data-parallel-size", str(d.spec.engine.data_parallel)),
            ("--data-parallel-size-local", str(share.local)),
        ]
        if rank > 0:
            flags.append(("--data-parallel-start-rank", str(share.start)))
        if d.multi:
            flags += [
                ("--data-parallel-address", d.head.control_ip),
                ("--data-parallel-rpc-port", str(d.spec.launch.data_parallel_rpc_port)),
            ]
        if rank > 0:
            flags.append(("--headless",))
        return tuple(flags)

    def memory_flags(self, d: Deployment) -> Command:
        """Speculative decoding (vLLM reads one JSON object) and the absolute KV-cache budget."""
        flags: list[Words] = []
        draft = d.spec.model.draft
        if draft is not None:
            config: dict[str, object] = {"method": engine_name(draft.method, self.kind) or draft.method.value}
            if draft.mount is not None:
                config["model"] = draft.mount
            given = {
                "num_speculative_tokens": draft.num_speculative_tokens,
                "prompt_lookup_min": draft.prompt_lookup_min,
                "prompt_lookup_max": draft.prompt_lookup_max,
            }
            config.update((key, value) for key, value in given.items() if value is not None)
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
                f"this node's {_plane(node)}; vLLM otherwise picks the default-route NIC",
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

    def start_gate(self, d: Deployment) -> StartGate | None:
        engine = d.spec.engine
        if engine.gpu_memory_utilization is not None:
            source = "gpu_memory_utilization"
        elif engine.kv_cache_memory is not None and d.value("gpu_memory_utilization"):
            source = "gpu_memory_utilization (derived from the weights and kv_cache_memory)"
        elif d.value("gpu_memory_utilization"):
            source = "the image entrypoint's gpu_memory_utilization"
        else:
            source = "vLLM's default gpu_memory_utilization"
        return vllm_gate(d.value("gpu_memory_utilization"), source)

    def kv_fraction(self, spec: Spec, facts: ModelFacts) -> float | None:
        kv = spec.engine.kv_cache_memory
        if kv is None or spec.engine.gpu_memory_utilization is not None:
            return None
        return kv_fraction(spec, facts, size_bytes(kv) or 0)

    def read_speculative(self, values: Mapping[str, str]) -> dict[str, Any] | None:
        """The speculative config as vLLM merges it (EngineArgs.create_speculative_config); None where it is
        no JSON object or a shorthand flag repeats one of its keys (vLLM refuses that)."""
        config: Any = {}
        if "--speculative-config" in values:
            try:
                config = loads_json(values["--speculative-config"], "--speculative-config")
            except BadJson:
                return None
        if not isinstance(config, dict):
            return None
        for flag, key in (
            ("--spec-method", "method"),
            ("--spec-model", "model"),
            ("--spec-tokens", "num_speculative_tokens"),
        ):
            if flag in values:
                if key in config:
                    return None
                value = values[flag]
                number = ascii_int(value) if key == "num_speculative_tokens" else None
                config[key] = value if number is None else number
        if config.get("method") is None:  # vLLM's own inference of the method
            config["method"] = "ngram" if config.get("model") in ("ngram", "[ngram]") else "draft_model"
        if config["method"] == "ngram" and config.get("model") in ("ngram", "[ngram]"):
            del config["model"]
        if config["method"] in VLLM_MTP_NAMES:  # vLLM reads each model's MTP name as mtp
            config["method"] = "mtp"
        return config


VLLM = Vllm()


def _plane(node: Node) -> str:
    return "control IP" if node.control else "fabric IP" if node.cabled else "loopback IP (one node without a fabric)"
