"""TensorRT-LLM: `trtllm-serve MODEL`, across nodes under mpirun (trtllm-llmapi-launch on every rank).

trtllm-serve reads the LLM API's own settings from a YAML file (--extra_llm_api_options), which wins over
its flags; sparkc writes the KV-cache budget and engine.llm_api_options there, and the rest as flags.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from compiler.engines import Deployment, EngineArgv, RecipeWords, group_args, kv_cache_bytes
from compiler.engines.flag_table import spellings
from compiler.plan import EngineMetrics, Setting, StartGate, Words
from compiler.spec.model_facts import ModelFacts
from compiler.spec.typed import Backend, EngineKind, Node, Source, Spec

# The build folder's files for TensorRT-LLM, and where the head's container sees them (read-only).
FILES_DIR = "trtllm"
FILES_MOUNT = "/sparkc/trtllm"
OPTIONS_FILE = "extra-llm-api-options.yaml"
HOSTFILE = "hostfile"

# The flags sparkc sets, as sparkc writes them, and the spec field that controls each.
MANAGED = {
    "--host": "engine.host",
    "--port": "engine.port",
    "--backend": "engine.kind",
    "--tp_size": "engine.tensor_parallel",
    "--pp_size": "engine.pipeline_parallel",
    "--max_seq_len": "engine.max_model_len",
    "--extra_llm_api_options": "engine.llm_api_options",
    "--trust_remote_code": "engine.trust_remote_code",
    "--reasoning_parser": "engine.reasoning_parser",
}
# Set only where the field is given (in the YAML file, which overrides the flag): then refused in engine.args.
FIELD = {"--kv_cache_free_gpu_memory_fraction": "engine.gpu_memory_utilization"}

MANAGED_FLAGS, _managed_aliases = spellings(EngineKind.TRTLLM, MANAGED)
FIELD_FLAGS, _field_aliases = spellings(EngineKind.TRTLLM, FIELD)
ALIASES = {**_managed_aliases, **_field_aliases}

SETTING_FLAGS = {"host": "--host", "port": "--port", "max_model_len": "--max_seq_len"}

# The LLM API keys sparkc writes in the YAML file, and the spec field behind each (engine.llm_api_options
# may not set them again).
OPTION_FIELDS = {
    ("kv_cache_config", "free_gpu_memory_fraction"): "engine.gpu_memory_utilization",
    ("kv_cache_config", "max_gpu_total_bytes"): "engine.kv_cache_memory",
}
# LLM API keys that trtllm-serve's own flags set from spec fields: in the file they would override them.
FLAG_OPTIONS = {
    "tensor_parallel_size": "engine.tensor_parallel",
    "pipeline_parallel_size": "engine.pipeline_parallel",
    "max_seq_len": "engine.max_model_len",
    "backend": "engine.kind",
    "model": "model.path",
    "trust_remote_code": "engine.trust_remote_code",
    "reasoning_parser": "engine.reasoning_parser",
}


class Trtllm:
    kind = EngineKind.TRTLLM
    name = "TensorRT-LLM"
    default_port = 8000  # trtllm-serve's --port default
    ray_carried_prefixes: tuple[str, ...] = ()
    supports_ray = False
    managed_flags: Mapping[str, str] = MANAGED_FLAGS
    field_flags: Mapping[str, str] = FIELD_FLAGS
    setting_flags: Mapping[str, str] = SETTING_FLAGS
    aliases: Mapping[str, str] = ALIASES
    # trtllm-serve has no start timeout of its own; the launcher's budget bounds it.
    timeout_variable: str | None = None
    timeout_flag: str | None = None
    api_key_variable: str | None = None
    replicas_whole_per_node = False
    dp_handshake_offset: int | None = None
    experts_evenly = False
    kv_budget_refusal: str | None = None  # written as kv_cache_config.max_gpu_total_bytes
    memory_chosen_at_start: str | None = None
    ranks_answer_health = False
    context_fits_memory: str | None = None  # --max_seq_len is a number of tokens
    allow_longer_variable: str | None = None  # none known: a warning says what a longer length risks
    supports_mpi = True  # trtllm-llmapi-launch on every rank, started by mpirun
    serves_folder_name = True
    aliases_refusal: str | None = (
        "trtllm-serve has no --served-model-name and serves the model under its folder's name only: remove "
        "model.aliases"
    )
    drafts_from_spec = False  # its speculative_config goes in engine.llm_api_options
    takes_llm_api_options = True
    recipe_words: RecipeWords | None = None  # no recipe launcher sparkc reads runs it
    # trtllm-serve's /metrics answers a JSON list of iteration statistics (each read takes them away), not
    # Prometheus text of requests running, waiting and tokens.
    metrics: EngineMetrics | None = None
    metrics_absent = (
        "TensorRT-LLM (trtllm-serve) serves no Prometheus metrics: its /metrics gives JSON iteration statistics"
    )
    # TensorRT-LLM's serving benchmark (tensorrt_llm/serve/scripts/benchmark_serving.py, vLLM's, adapted): random
    # token ids (without --random-ids its random set samples ShareGPT, a download); the result as vLLM writes it.
    bench_command: tuple[str, ...] = (
        "python3", "-m", "tensorrt_llm.serve.scripts.benchmark_serving", "--backend", "openai",
        "--base-url", "@URL@", "--model", "@MODEL@", "--tokenizer", "@TOKENIZER@", "--dataset-name", "random",
        "--random-input-len", "@INPUT@", "--random-output-len", "@OUTPUT@", "--random-ids",
        "--num-prompts", "@PROMPTS@", "--max-concurrency", "@CONCURRENCY@",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
        "--save-result", "--result-dir", "@RESULTS@", "--result-filename", "@RESULT@",
    )  # fmt: skip

    def default_backend(self, nodes: int) -> Backend:
        return Backend.MPI if nodes > 1 else Backend.NATIVE

    def canonical(self, flag: str) -> str:
        # click matches an option's names exactly: `--tp-size` is no spelling of `--tp_size`.
        return flag

    def implied_flags(self, d: Deployment) -> dict[str, str]:
        return {}

    def argv(self, d: Deployment, rank: int) -> EngineArgv:
        """The command rank 0 runs (every rank under mpirun, through trtllm-llmapi-launch)."""
        engine = d.spec.engine
        flags: list[Words] = [
            ("--host", d.value("host")),
            ("--port", d.value("port")),
            ("--backend", "pytorch"),
            ("--tp_size", str(engine.tensor_parallel)),
            ("--pp_size", str(engine.pipeline_parallel)),
        ]
        if d.value("max_model_len"):
            flags.append(("--max_seq_len", d.value("max_model_len")))
        flags.append(("--extra_llm_api_options", f"{FILES_MOUNT}/{OPTIONS_FILE}"))
        if engine.trust_remote_code:
            flags.append(("--trust_remote_code",))
        if engine.reasoning_parser is not None:
            flags.append(("--reasoning_parser", engine.reasoning_parser))
        program = (("trtllm-serve",), (d.spec.model.mount,))
        return EngineArgv(program, tuple(flags), group_args(engine.args))

    def read_speculative(self, values: Mapping[str, str]) -> dict[str, Any] | None:
        return None  # its speculative decoding is an LLM API option, not flags

    def llm_api_options(self, d: Deployment) -> dict[str, Any]:
        """The YAML file's content: engine.llm_api_options with sparkc's KV-cache keys merged in."""
        options: dict[str, Any] = json.loads(json.dumps(d.spec.engine.llm_api_options))
        kv = dict(options.get("kv_cache_config") or {})
        fraction = d.spec.engine.gpu_memory_utilization
        if fraction is not None:
            kv["free_gpu_memory_fraction"] = fraction
        total = kv_cache_bytes(d)
        if total is not None:
            kv["max_gpu_total_bytes"] = total
        if kv:
            options["kv_cache_config"] = kv
        return options

    def start_gate(self, d: Deployment) -> StartGate | None:
        return None  # free_gpu_memory_fraction is a share of what is free after the load: it sizes itself

    def kv_fraction(self, spec: Spec, facts: ModelFacts) -> float | None:
        return None  # kv_cache_config.max_gpu_total_bytes needs no fraction beside it

    def build_files(self, d: Deployment) -> tuple[tuple[str, str], ...]:
        header = (
            f"# Written by sparkc for deployment {d.spec.name}: trtllm-serve reads it as --extra_llm_api_options\n"
            "# (TensorRT-LLM's LLM API arguments; they win over its flags). Change the spec, not this file.\n"
        )
        return ((f"{FILES_DIR}/{OPTIONS_FILE}", header + yaml_text(self.llm_api_options(d))),)

    def node_env(self, d: Deployment, node: Node) -> tuple[Setting, ...]:
        playbook = "as NVIDIA's DGX Spark playbook sets it for TensorRT-LLM"
        toolkit = (
            Setting("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas", Source.DEFAULT, f"the CUDA ptxas; {playbook}"),
            Setting("CPATH", "/usr/local/cuda/include", Source.DEFAULT, f"the CUDA headers for JIT builds; {playbook}"),
        )
        if d.backend is not Backend.MPI:
            return toolkit
        why = "mpirun runs as root in the container; Open MPI refuses root without both"
        # mpirun hands its own OMPI_MCA_* settings to the daemons it starts on the other nodes: each must name
        # every node's interfaces (Open MPI skips a name a node lacks), or a node cabled otherwise finds none.
        data = ",".join(sorted({n for other in d.nodes for n in other.fabric.netdevs}))
        control = ",".join(sorted({(other.control or other.fabric).netdev for other in d.nodes}))
        carried = "mpirun passes its value to every node's Open MPI daemon: every node's"
        plane = "control" if node.control else "fabric"
        oob = f"Open MPI's own channel between its daemons; {carried} {plane} netdevs"
        return (
            *toolkit,
            Setting("OMPI_ALLOW_RUN_AS_ROOT", "1", Source.DERIVED, why),
            Setting("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", Source.DERIVED, why),
            Setting("OMPI_MCA_btl_tcp_if_include", data, Source.DERIVED, f"{carried} data netdevs"),
            Setting("OMPI_MCA_oob_tcp_if_include", control, Source.DERIVED, f"{oob} (Open MPI 4)"),
            # Open MPI 5 starts its daemons through PRRTE, which reads its own name for the same setting.
            Setting("PRTE_MCA_oob_tcp_if_include", control, Source.DERIVED, f"{oob} (Open MPI 5, PRRTE)"),
        )


# A key YAML reads as this very string when written bare; others are written quoted (as JSON strings).
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null"})


def yaml_text(data: Mapping[str, Any], indent: int = 0) -> str:
    """Block YAML, keys sorted; scalars and lists as JSON (which YAML reads as the same values)."""
    if not data and indent == 0:
        return "{}\n"
    out = []
    for key in sorted(data):
        value = data[key]
        name = key if _PLAIN_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS else json.dumps(key)
        if isinstance(value, Mapping) and value:
            out.append(f"{' ' * indent}{name}:\n{yaml_text(value, indent + 2)}")
        else:
            out.append(f"{' ' * indent}{name}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}\n")
    return "".join(out)


def hostfile_text(d: Deployment) -> str:
    """Open MPI's hostfile: where each node's container is reached (its fabric address, its control address
    where the spec separates the planes), ranks in order from the head, one slot per GPU."""
    lines = [f"# Written by sparkc for deployment {d.spec.name}: mpirun's hosts, rank order, one slot per GPU.\n"]
    lines += [f"{node.control_ip} slots={node.gpus}\n" for node in d.nodes]
    return "".join(lines)


TRTLLM = Trtllm()
