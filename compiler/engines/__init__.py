"""Engines behind one interface: each module knows its engine's command line, flags and variables.

Nothing outside this package asks which engine it is; it asks the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from compiler.plan import Command, EngineMetrics, Setting, StartGate, Words
from compiler.sizes import size_bytes
from compiler.spec.model_facts import ModelFacts
from compiler.spec.typed import Backend, EngineKind, Node, Spec


class Deployment(Protocol):
    """What an engine reads of a deployment. The resolver's Deployment (compiler.resolve.context) is one;
    declared here so that engines depend on nothing of the resolver, which depends on them."""

    @property
    def spec(self) -> Spec: ...

    @property
    def backend(self) -> Backend: ...

    @property
    def head(self) -> Node: ...

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Head first (rank 0), then the workers."""
        ...

    @property
    def multi(self) -> bool: ...

    @property
    def total_gpus(self) -> int: ...

    @property
    def engine_timeout(self) -> int: ...

    @property
    def engine_timeout_margin(self) -> int: ...

    @property
    def served_model_name(self) -> str: ...

    def value(self, setting: str) -> str:
        """The effective value of an entrypoint-controlled setting, as the engine will see it."""
        ...


@dataclass(frozen=True)
class RecipeWords:
    """How recipes of other launchers (spark-vllm-docker, sparkrun) write this engine's command."""

    program: str  # the command sparkrun's launcher runs for a recipe without one
    # sparkrun's `defaults` keys -> the flag its launcher writes for each; switches are written when true.
    default_flags: Mapping[str, str]
    default_switches: Mapping[str, str]
    # The flags of speculative decoding, read together (read_speculative) into model.draft.
    speculative_flags: tuple[str, ...]
    # Data- and expert-parallel flags read as engine.data_parallel (its size) and engine.expert_parallel (a
    # switch); the per-node ones sparkc derives are managed flags, dropped.
    replica_fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineArgv:
    """An engine's command line: the program (and its positional words), the flags sparkc sets, then
    the user's own words (engine.args), last, as they wrote them."""

    program: Command
    flags: Command
    user: Command

    @property
    def command(self) -> Command:
        return self.program + self.flags + self.user


class Engine(Protocol):
    kind: EngineKind
    name: str  # as its project spells it
    default_port: int
    supports_ray: bool  # can run under Ray's executor; otherwise it forms its own group
    ray_carried_prefixes: tuple[str, ...]  # variables its Ray executor copies from the head to the workers
    # Every spelling of every flag sparkc sets, and the spec field that controls it.
    managed_flags: Mapping[str, str]
    # Flags sparkc sets only where their spec field is given (a draft model, a KV-cache budget).
    field_flags: Mapping[str, str]
    # Effective setting (model_path, host, port, ...) -> the flag that carries it.
    setting_flags: Mapping[str, str]
    # Other spellings of a flag sparkc passes -> the spelling sparkc writes.
    aliases: Mapping[str, str]
    # Where the engine takes its own start timeout (a variable, or a flag's value on every rank).
    timeout_variable: str | None
    timeout_flag: str | None
    # The variable the engine reads its API key from (None: only its --api-key flag).
    api_key_variable: str | None
    # Multi-node data parallel runs each replica whole on one node, the nodes meeting only on the head's RPC
    # port (True), rather than inside one group across the nodes.
    replicas_whole_per_node: bool
    # Its attention data parallel hands ports over on the rendezvous port plus this; None: no such handshake.
    dp_handshake_offset: int | None
    # Expert parallel refuses experts that do not divide evenly over its GPUs (otherwise some ranks get one more).
    experts_evenly: bool
    # Why it cannot take engine.kv_cache_memory (it has no budget in bytes); None: it can.
    kv_budget_refusal: str | None
    # What sizes its memory, chosen at start, where no fraction is given; None: its default fraction does.
    memory_chosen_at_start: str | None
    # Its ranks other than the head answer /health on the API port while they run.
    ranks_answer_health: bool
    # The word its context-length flag takes for "the longest context the KV cache holds at start" (vLLM's
    # `--max-model-len auto`); None: it takes only a number of tokens.
    context_fits_memory: str | None
    # The variable that lets it take a max_model_len longer than the model's config allows; None: it never refuses.
    allow_longer_variable: str | None
    supports_mpi: bool  # forms its group of nodes under mpirun
    # It has no --served-model-name: a local folder is served under the folder's own name.
    serves_folder_name: bool
    # Why it cannot serve model.aliases (its --served-model-name takes one name, or it has none); None: it can.
    aliases_refusal: str | None
    # It runs speculative decoding from model.draft (otherwise only from its own options).
    drafts_from_spec: bool
    # It reads engine.llm_api_options (TensorRT-LLM's LLM API file).
    takes_llm_api_options: bool
    # What `sparkc import` needs to read other launchers' recipes for this engine; None: none run it.
    recipe_words: RecipeWords | None

    # The Prometheus samples status.sh reads on the API port's /metrics; None: it serves none, for the reason
    # metrics_absent gives.
    metrics: EngineMetrics | None
    metrics_absent: str

    # The engine's own serving benchmark: its command with @INPUT@, @OUTPUT@, @PROMPTS@, @CONCURRENCY@,
    # @URL@, @MODEL@, @TOKENIZER@ and @RESULT@ (a file in the results folder) for bench.sh to fill in.
    bench_command: tuple[str, ...]

    def default_backend(self, nodes: int) -> Backend: ...

    def canonical(self, flag: str) -> str:
        """A flag as the engine's parser reads it (vLLM takes `--max_model_len` for `--max-model-len`)."""
        ...

    def implied_flags(self, d: Deployment) -> dict[str, str]:
        """Flags the engine behaves as if given, though sparkc does not pass them (its defaults)."""
        ...

    def argv(self, d: Deployment, rank: int) -> EngineArgv: ...

    def node_env(self, d: Deployment, node: Node) -> tuple[Setting, ...]:
        """The engine's own per-node variables."""
        ...

    def build_files(self, d: Deployment) -> tuple[tuple[str, str], ...]:
        """The engine's own files in the build folder (path under it, text), mounted into the head's container."""
        ...

    def start_gate(self, d: Deployment) -> StartGate | None:
        """What the engine demands of a node's free memory as it starts (compiler.engines.memory); None: nothing."""
        ...

    def kv_fraction(self, spec: Spec, facts: ModelFacts) -> float | None:
        """The memory fraction to pass beside kv_cache_memory where the spec gives none, so that the engine's
        start check asks for what the instance needs; None: the engine needs none."""
        ...

    def read_speculative(self, values: Mapping[str, str]) -> dict[str, Any] | None:
        """Its speculative flags (recipe_words.speculative_flags -> the value given) as one config in the
        spec's terms (method, model, num_speculative_tokens, ...); None where the spec cannot hold them."""
        ...


def group_args(args: tuple[str, ...]) -> Command:
    """The user's extra engine words as groups: a `--flag` without `=` shares a line with the value after it."""
    groups: list[Words] = []
    for word in args:
        previous = groups[-1] if groups else ()
        pairs = len(previous) == 1 and previous[0].startswith("-") and "=" not in previous[0]
        if pairs and not word.startswith("-"):
            groups[-1] = (previous[0], word)
        else:
            groups.append((word,))
    return tuple(groups)


def common_flags(d: Deployment) -> Command:
    """Flags both engines spell alike."""
    engine = d.spec.engine
    flags: list[Words] = []
    if engine.trust_remote_code:
        flags.append(("--trust-remote-code",))
    if engine.reasoning_parser is not None:
        flags.append(("--reasoning-parser", engine.reasoning_parser))
    return tuple(flags)


def kv_cache_bytes(d: Deployment) -> int | None:
    """engine.kv_cache_memory in bytes (per GPU), as docker's size syntax reads it."""
    given = d.spec.engine.kv_cache_memory
    return None if given is None else size_bytes(given)


@dataclass(frozen=True)
class DataParallelShare:
    """The data-parallel ranks one node runs: `local` of them, numbered from `start`."""

    local: int
    start: int


def data_parallel_shares(d: Deployment) -> tuple[DataParallelShare, ...]:
    """Per node in rank order (head first): whole replicas of tensor x pipeline parallel GPUs each. A rule
    refuses a node whose GPUs hold no whole number of replicas."""
    engine = d.spec.engine
    per_replica = engine.tensor_parallel * engine.pipeline_parallel
    shares, start = [], 0
    for node in d.nodes:
        local = node.gpus // per_replica
        shares.append(DataParallelShare(local, start))
        start += local
    return tuple(shares)


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def engines() -> dict[EngineKind, Engine]:
    from compiler.engines.sglang import SGLANG
    from compiler.engines.trtllm import TRTLLM
    from compiler.engines.vllm import VLLM

    return {VLLM.kind: VLLM, SGLANG.kind: SGLANG, TRTLLM.kind: TRTLLM}


def engine_for(kind: EngineKind | str) -> Engine:
    """The one place an engine kind becomes its engine; everything after asks the engine."""
    return engines()[EngineKind(kind)]
