"""SGLang: `python3 -m sglang.launch_server`, multi-node through its own --nnodes group (no Ray)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.engines import Deployment, EngineArgv, RecipeWords, common_flags, group_args, host_port
from compiler.engines.flag_table import spellings
from compiler.engines.speculative import SGLANG_NAMES, engine_name
from compiler.plan import Command, EngineMetrics, Setting, StartGate, Words
from compiler.spec.model_facts import ModelFacts
from compiler.spec.typed import Backend, EngineKind, Node, Source, Spec
from compiler.user_files import ascii_int

# The flags sparkc sets, by their full names (never an abbreviation such as `--tp`, which stops working
# the day SGLang adds another flag starting with it), and the spec field that controls each.
MANAGED = {
    "--port": "engine.port",
    "--host": "engine.host",
    "--model-path": "model.mount",
    "--tp-size": "engine.tensor_parallel",
    "--pp-size": "engine.pipeline_parallel",
    "--context-length": "engine.max_model_len",
    "--mem-fraction-static": "engine.gpu_memory_utilization",
    "--served-model-name": "model.name",
    "--trust-remote-code": "engine.trust_remote_code",
    "--reasoning-parser": "engine.reasoning_parser",
    "--nnodes": "cluster.nodes",
    "--node-rank": "cluster.nodes",
    "--dist-init-addr": "cluster.head",
    "--dist-timeout": "launch.timeout",
    # Data parallel is SGLang's attention data parallel inside one tensor-parallel group (--dp-size replicas
    # do not span nodes); expert parallel spreads the experts over that group.
    "--attn-dp-size": "engine.data_parallel",
    "--dp-size": "engine.data_parallel",
    "--enable-dp-attention": "engine.data_parallel",
    "--ep-size": "engine.expert_parallel",
}

# Flags sparkc sets only when the spec field is given; then they are refused in engine.args too.
FIELD = {
    "--speculative-algorithm": "model.draft",
    "--speculative-draft-model-path": "model.draft",
    "--speculative-num-steps": "model.draft.num_speculative_tokens",
    "--speculative-eagle-topk": "model.draft",
    "--speculative-num-draft-tokens": "model.draft.num_speculative_tokens",
}

# Every spelling SGLang's parser takes for them (`--model`, `--tensor-parallel-size`), from its flag table.
MANAGED_FLAGS, _managed_aliases = spellings(EngineKind.SGLANG, MANAGED)
FIELD_FLAGS, _field_aliases = spellings(EngineKind.SGLANG, FIELD)
# Other spellings of a flag sparkc passes, as the one sparkc writes.
ALIASES = {**_managed_aliases, **_field_aliases}

SETTING_FLAGS = {
    "model_path": "--model-path",
    "host": "--host",
    "port": "--port",
    "max_model_len": "--context-length",
    "gpu_memory_utilization": "--mem-fraction-static",
}


class Sglang:
    kind = EngineKind.SGLANG
    name = "SGLang"
    default_port = 30000
    # Variables its Ray executor copies from the head to every worker (by prefix, or the whole name).
    ray_carried_prefixes: tuple[str, ...] = ()
    supports_ray = False
    managed_flags: Mapping[str, str] = MANAGED_FLAGS
    field_flags: Mapping[str, str] = FIELD_FLAGS
    setting_flags: Mapping[str, str] = SETTING_FLAGS
    aliases: Mapping[str, str] = ALIASES
    # Where the engine takes its own start timeout, which the launcher sets from its budget at launch.
    timeout_variable: str | None = None
    timeout_flag: str | None = "--dist-timeout"
    api_key_variable: str | None = None
    replicas_whole_per_node = False  # attention data parallel: the replicas live inside the TP group
    # The head hands its worker ports to the other nodes on the rendezvous port plus this
    # (sglang/srt/server_args.py DP_ATTENTION_HANDSHAKE_PORT_DELTA).
    dp_handshake_offset: int | None = 13
    experts_evenly = True  # its expert location map asserts it
    kv_budget_refusal: str | None = (
        "SGLang has no absolute KV-cache budget in bytes (its --max-total-tokens counts tokens, "
        "--mem-fraction-static is a fraction); set engine.gpu_memory_utilization instead"
    )
    memory_chosen_at_start: str | None = "SGLang's own mem_fraction_static"
    ranks_answer_health = True  # ranks >= 1 run a stand-in server on the API port
    # ModelConfig: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN.
    context_fits_memory: str | None = None  # --context-length is a number of tokens
    allow_longer_variable: str | None = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    supports_mpi = False
    serves_folder_name = False
    aliases_refusal: str | None = (
        "SGLang's --served-model-name takes one name (it would refuse a second word after it): remove "
        "model.aliases and serve the model under model.name alone"
    )
    drafts_from_spec = True
    takes_llm_api_options = False
    recipe_words: RecipeWords | None = RecipeWords(
        program="python3 -m sglang.launch_server",
        default_flags={
            "port": "--port",
            "host": "--host",
            "tensor_parallel": "--tp-size",
            "pipeline_parallel": "--pp-size",
            "gpu_memory_utilization": "--mem-fraction-static",
            "max_model_len": "--context-length",
            "max_num_seqs": "--max-running-requests",
            "served_model_name": "--served-model-name",
            "dtype": "--dtype",
            "quantization": "--quantization",
            "chunked_prefill": "--chunked-prefill-size",
            "kv_cache_dtype": "--kv-cache-dtype",
            "tokenizer_path": "--tokenizer-path",
        },
        default_switches={
            "trust_remote_code": "--trust-remote-code",
            "enable_torch_compile": "--enable-torch-compile",
            "disable_radix_cache": "--disable-radix-cache",
        },
        speculative_flags=(
            "--speculative-algorithm",
            "--speculative-draft-model-path",
            "--speculative-num-steps",
            "--speculative-eagle-topk",
            "--speculative-num-draft-tokens",
        ),
    )
    # sglang/srt/metrics/collector.py: gauges and counters labelled model_name (and the ranks); token_usage is
    # the KV cache's share in use. Its server adds /metrics only under --enable-metrics, which argv passes.
    metrics: EngineMetrics | None = EngineMetrics(
        running="sglang:num_running_reqs",
        waiting="sglang:num_queue_reqs",
        kv_usage=("sglang:token_usage",),
        prompt_tokens="sglang:prompt_tokens_total",
        generation_tokens="sglang:generation_tokens_total",
        note="SGLang serves /metrics only when started with --enable-metrics (sparkc passes it: was the engine "
        "started by this deployment's launch-cluster.sh?)",
    )
    metrics_absent = ""
    # `python3 -m sglang.bench_serving`: random prompts, so no data set download; one JSON line per run.
    bench_command: tuple[str, ...] = (
        "python3", "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", "@URL@",
        "--model", "@MODEL@", "--tokenizer", "@TOKENIZER@", "--dataset-name", "random",
        "--random-input-len", "@INPUT@", "--random-output-len", "@OUTPUT@", "--random-range-ratio", "1",
        "--num-prompts", "@PROMPTS@", "--max-concurrency", "@CONCURRENCY@", "--output-file", "@RESULTS@/@RESULT@",
    )  # fmt: skip

    def default_backend(self, nodes: int) -> Backend:
        return Backend.NATIVE

    def canonical(self, flag: str) -> str:
        # SGLang's parser is plain argparse: `--mem_fraction_static` is no spelling of `--mem-fraction-static`.
        return flag

    def implied_flags(self, d: Deployment) -> dict[str, str]:
        # One pipeline stage is SGLang's default: sparkc passes --pp-size only above 1.
        return {"--pp-size": "1"} if d.spec.engine.pipeline_parallel == 1 else {}

    def argv(self, d: Deployment, rank: int) -> EngineArgv:
        engine = d.spec.engine
        flags: list[Words] = [
            ("--model-path", d.spec.model.mount),
            ("--served-model-name", d.served_model_name),
            ("--host", d.value("host")),
            ("--port", d.value("port")),
            ("--tp-size", str(self.group_size(d))),
        ]
        if engine.data_parallel > 1:
            flags.append(("--attn-dp-size", str(engine.data_parallel)))
        if engine.expert_parallel:
            flags.append(("--ep-size", str(self.group_size(d))))
        if engine.pipeline_parallel > 1:
            flags.append(("--pp-size", str(engine.pipeline_parallel)))
        flags += [(SETTING_FLAGS[s], d.value(s)) for s in ("max_model_len", "gpu_memory_utilization") if d.value(s)]
        if "--enable-metrics" not in engine.args:
            flags.append(("--enable-metrics",))  # status.sh and watch.sh read /metrics, served only under it
        if d.multi:
            flags += [
                ("--nnodes", str(len(d.nodes))),
                ("--node-rank", str(rank)),
                ("--dist-init-addr", host_port(d.head.control_ip, d.spec.launch.master_port)),
                ("--dist-timeout", str(d.engine_timeout)),
            ]
        program = (("python3",), ("-m", "sglang.launch_server"))
        return EngineArgv(program, tuple(flags) + common_flags(d) + self.memory_flags(d), group_args(engine.args))

    def group_size(self, d: Deployment) -> int:
        """SGLang's --tp-size: its tensor-parallel group holds the attention data-parallel replicas, each of
        tensor_parallel GPUs (sglang/srt/server_args.py: attention DP runs inside the TP group)."""
        return d.spec.engine.tensor_parallel * d.spec.engine.data_parallel

    def memory_flags(self, d: Deployment) -> Command:
        """Speculative decoding. A chain (draft model, EAGLE, NEXTN): N draft steps of one candidate each
        (top-k 1), verified as N + 1 tokens, which is how SGLang counts a chain. NGRAM: N + 1 draft tokens
        (the last verified one and N proposed), its breadth and steps from SGLang's own defaults. Without
        N, SGLang chooses. SGLang has no absolute KV-cache budget (a rule says so)."""
        draft = d.spec.model.draft
        if draft is None:
            return ()
        algorithm = engine_name(draft.method, self.kind) or draft.method.value
        flags: list[Words] = [("--speculative-algorithm", algorithm)]
        if draft.mount is not None:
            flags.append(("--speculative-draft-model-path", draft.mount))
        steps = draft.num_speculative_tokens
        if steps is not None and algorithm == "NGRAM":
            flags.append(("--speculative-num-draft-tokens", str(steps + 1)))
        elif steps is not None:
            flags += [
                ("--speculative-num-steps", str(steps)),
                ("--speculative-eagle-topk", "1"),
                ("--speculative-num-draft-tokens", str(steps + 1)),
            ]
        return tuple(flags)

    def node_env(self, d: Deployment, node: Node) -> tuple[Setting, ...]:
        host_ip = Setting(
            "SGLANG_HOST_IP",
            node.control_ip,
            Source.DERIVED,
            f"this node's {'control' if node.control else 'fabric'} IP; SGLang otherwise advertises another NIC",
        )
        if not d.multi:
            return (host_ip,)
        # On unified memory, page cache makes one rank's free memory look smaller than another's;
        # SGLang then refuses to start ("The memory capacity is unbalanced").
        why = "unified memory: free memory differs between ranks by page cache, not by use"
        return (
            host_ip,
            Setting("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", "0", Source.DERIVED, why + " (newer SGLang)"),
            Setting("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK", "1", Source.DERIVED, why + " (older SGLang)"),
        )

    def build_files(self, d: Deployment) -> tuple[tuple[str, str], ...]:
        return ()

    def start_gate(self, d: Deployment) -> StartGate | None:
        return None  # --mem-fraction-static is a share of what is free at start, not of the total

    def kv_fraction(self, spec: Spec, facts: ModelFacts) -> float | None:
        return None  # no byte budget: a rule refuses kv_cache_memory

    def read_speculative(self, values: Mapping[str, str]) -> dict[str, Any] | None:
        """The speculative flags as the spec says them: a chain of N steps of one candidate (N + 1 draft
        tokens), or NGRAM's draft tokens; None for what the spec cannot hold (a tree, another algorithm)."""
        algorithm = values.get("--speculative-algorithm", "").upper()
        method = {v: k for k, v in SGLANG_NAMES.items()}.get(algorithm)
        numbers = {f: v for f, v in values.items() if f not in ("--speculative-algorithm", _DRAFT_PATH)}
        counts = {f: ascii_int(v) for f, v in numbers.items()}
        if method is None or None in counts.values():
            return None
        steps, topk, tokens = (
            counts.get(f)
            for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
        )
        config: dict[str, Any] = {"method": method}
        if _DRAFT_PATH in values:
            config["model"] = values[_DRAFT_PATH]
        if method == "ngram":
            if steps is not None or topk is not None:
                return None
            if tokens is not None:
                config["num_speculative_tokens"] = tokens - 1
        elif steps is not None:
            if topk not in (None, 1) or tokens not in (None, steps + 1):
                return None
            config["num_speculative_tokens"] = steps
        elif topk is not None or tokens is not None:
            return None
        return config


_DRAFT_PATH = "--speculative-draft-model-path"

SGLANG = Sglang()
