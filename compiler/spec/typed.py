"""The validated spec as typed, frozen values, built once right after validation (by compiler.spec.build).

Every section knows where it sits in the spec (`location`) and which of its keys the user wrote (`given`), so
provenance travels with the values: `source("port")` is `spec` or `default`. Env values are already strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from compiler.diagnostics import Path


class Source(StrEnum):
    """Where a resolved value came from."""

    SPEC = "spec"  # the user wrote it
    DEFAULT = "default"  # sparkc's (or the schema's) default
    PROFILE = "profile"  # the image profile: what the image's entrypoint does
    DERIVED = "derived"  # computed from other values


class EngineKind(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"  # TensorRT-LLM's trtllm-serve


class Backend(StrEnum):
    RAY = "ray"
    NATIVE = "native"  # the engine's own multi-node group (or a single node)
    MPI = "mpi"  # mpirun from the head's container over ssh into every node's (TensorRT-LLM)


class EntrypointMode(StrEnum):
    AUTO = "auto"
    BYPASS = "bypass"
    ADAPT = "adapt"
    KEEP = "keep"


class FabricTransport(StrEnum):
    """How NCCL crosses the fabric (cluster.nodes[].fabric.transport)."""

    RDMA = "rdma"  # RoCE through the RDMA devices hcas lists
    SOCKETS = "sockets"  # TCP on the fabric netdev, on purpose


class Topology(StrEnum):
    DIRECT = "direct"
    SWITCH = "switch"
    MESH = "mesh"
    RING = "ring"


@dataclass(frozen=True)
class Section:
    location: Path  # where the section sits in the spec
    given: frozenset[str]

    def is_given(self, key: str) -> bool:
        return key in self.given

    def source(self, key: str) -> Source:
        return Source.SPEC if key in self.given else Source.DEFAULT

    def at(self, *keys: str | int) -> Path:
        return self.location + keys


@dataclass(frozen=True)
class Ssh(Section):
    user: str | None
    port: int
    identity_file: str | None
    connect_timeout: int
    options: tuple[str, ...]


@dataclass(frozen=True)
class Fabric(Section):
    ip: str
    netdev: str
    netdevs: tuple[str, ...]  # the data interfaces: fabric.netdevs, else netdev alone
    hcas: tuple[str, ...]
    addresses: dict[str, str]  # netdev -> IPv4 address: the fabric netdevs other than `netdev`
    transport: FabricTransport = FabricTransport.RDMA


@dataclass(frozen=True)
class ControlPlane(Section):
    netdev: str
    ip: str


@dataclass(frozen=True)
class Node(Section):
    index: int  # position in cluster.nodes
    name: str
    ssh: str | None
    fabric: Fabric
    control: ControlPlane | None  # None: the fabric carries the control plane too
    gpus: int
    env: dict[str, str]
    memory_gb: int | float  # memory the node's OS and engine share (unified on a Spark)

    @property
    def control_ip(self) -> str:  # rendezvous, Gloo, Ray and the engine's host address
        return (self.control or self.fabric).ip

    @property
    def cabled(self) -> bool:
        """The spec gives the node a fabric; a single node may go without (LOOPBACK stands in)."""
        return self.is_given("fabric")


@dataclass(frozen=True)
class HostHooks(Section):
    """cluster.hooks: commands for each node's host, run over ssh before the containers start."""

    pre_launch: tuple[str, ...]  # each run by sh -c on the host, in order
    sudo: bool  # through sudo -n, as root; else as the ssh user


@dataclass(frozen=True)
class Cluster(Section):
    ssh: Ssh
    head: str | None
    topology: Topology | None
    link_prefix_length: int  # mesh and ring: the prefix of each cable's own subnet
    nodes: tuple[Node, ...]
    hooks: HostHooks | None = None


@dataclass(frozen=True)
class Mount(Section):
    host: str  # absolute, or under ~/: the ssh user's home on each node
    container: str
    readonly: bool

    @property
    def in_home(self) -> bool:
        return self.host.startswith("~/")


@dataclass(frozen=True)
class Hooks(Section):
    pre_engine: tuple[str, ...]  # each run by sh -c inside the container, in order
    patches: str | None  # a folder beside the spec, mounted read-only into every container


@dataclass(frozen=True)
class ImageBuild(Section):
    """container.build: the image built on the head by docker build, tagged container.image."""

    context: str  # the build's folder on the head
    dockerfile: str  # relative to context
    args: dict[str, str]  # --build-arg NAME=VALUE, values as docker reads them (booleans 1/0)


@dataclass(frozen=True)
class Logs(Section):
    """container.logs: docker's json-file driver, bounded."""

    max_size: str  # as docker's json-file driver reads it (k, m, g in powers of 1000)
    max_file: int


# Without container.logs: at most 5 x 50 MB of log per container (the schema says the same).
LOG_MAX_SIZE = "50m"
LOG_MAX_FILE = 5


@dataclass(frozen=True)
class Container(Section):
    image: str
    entrypoint: EntrypointMode
    privileged: bool
    gpus: str  # all | none
    ulimits: dict[str, str | None]  # None removes one of sparkc's defaults
    mounts: tuple[Mount, ...]
    shm_size: int | str | None  # as written; sizes.size_bytes gives docker's byte count
    env: dict[str, str]
    secrets: tuple[str, ...]
    cache: bool  # container.cache.enabled
    cache_host: str | None  # container.cache.host; None: sparkc's default for the image
    logs: Logs
    hooks: Hooks | None = None
    build: ImageBuild | None = None


@dataclass(frozen=True)
class Architecture(Section):
    attention_heads: int | None
    kv_heads: int | None
    experts: int | None


# A full commit id names a snapshot folder of a Hugging Face cache; anything else is a branch or tag,
# which the cache resolves through refs/<name>.
COMMIT = re.compile(r"[0-9a-f]{40}")
HF_CONTAINER_CACHE = "/root/.cache/huggingface/hub"  # where huggingface_hub looks by default, as root


class DraftMethod(StrEnum):
    """How draft tokens are proposed (compiler/engines/speculative.py says which engine has which)."""

    DRAFT_MODEL = "draft_model"  # a smaller model of the same family
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    DFLASH = "dflash"  # a block-diffusion draft that reads the target's hidden states, as EAGLE-3 does
    MEDUSA = "medusa"  # Medusa heads
    MLP_SPECULATOR = "mlp_speculator"  # IBM's MLP speculator
    MTP = "mtp"  # the model's own multi-token-prediction layers
    NGRAM = "ngram"  # prompt lookup: n-grams of the prompt, no weights
    NGRAM_GPU = "ngram_gpu"  # vLLM's prompt lookup on the GPU
    SUFFIX = "suffix"  # suffix trees of the prompt and past answers, no weights


@dataclass(frozen=True)
class Draft(Section):
    """model.draft: speculative decoding. path is None where the method has no weights of its own."""

    path: str | None
    mount: str | None  # where the container sees the draft: draft.mount, else the host path
    method: DraftMethod
    num_speculative_tokens: int | None  # None: the engine's own default, where it has one
    prompt_lookup_min: int | None = None  # ngram: the n-gram window (vLLM)
    prompt_lookup_max: int | None = None
    repo: str | None = None  # the Hugging Face repo id it comes from (fetch-model.sh downloads it into path)


@dataclass(frozen=True)
class HfCache(Section):
    """Weights in a Hugging Face cache: `<cache>/models--ORG--NAME/{refs,snapshots,blobs}`."""

    cache: str  # the host's hub folder
    repo: str  # ORG/NAME
    revision: str  # a commit, or a branch or tag resolved through refs/ at launch

    @property
    def repo_folder(self) -> str:
        return f"{self.cache}/models--{self.repo.replace('/', '--')}"

    @property
    def pinned(self) -> bool:
        return COMMIT.fullmatch(self.revision) is not None


@dataclass(frozen=True)
class Model(Section):
    path: str
    mount: str  # where the container sees the weights: model.mount, else the host path
    name: str | None
    architecture: Architecture
    draft: Draft | None
    revision: str | None  # the weights' revision as the spec gives it; checked at launch where it can be
    hf: HfCache | None  # weights in a Hugging Face cache (path and mount then derive from it)
    size_gb: int | float | None  # the weights' size where the compiling machine cannot read it
    repo: str | None = None  # the Hugging Face repo id the weights come from (fetch-model.sh downloads it)
    aliases: tuple[str, ...] = ()  # more served names after the first (model.name or the derived one)


@dataclass(frozen=True)
class Engine(Section):
    kind: EngineKind
    backend: Backend | None
    tensor_parallel: int
    pipeline_parallel: int
    port: int | None
    host: str
    max_model_len: int | Literal["auto"] | None  # auto: the engine fits it to its KV cache at start
    gpu_memory_utilization: int | float | None
    trust_remote_code: bool
    reasoning_parser: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    kv_cache_memory: int | str | None  # a size as written (sizes.size_bytes: bytes per GPU)
    data_parallel: int = 1  # model replicas; TP x PP x DP = the nodes' GPUs
    expert_parallel: bool = False  # MoE: experts spread over TP x DP GPUs
    llm_api_options: dict[str, Any] = field(default_factory=dict)  # TensorRT-LLM's extra LLM API options


@dataclass(frozen=True)
class Launch(Section):
    timeout: int
    ray_port: int
    master_port: int
    ray_object_store_memory: int
    nccl_check: bool | None
    drop_page_cache: bool
    probe: bool | None
    data_parallel_rpc_port: int = 29550  # vLLM DP across nodes: where the other nodes' engines reach the head
    mpi_ssh_port: int = 2233  # sshd in every container, for mpirun (backend mpi)


@dataclass(frozen=True)
class Watch(Section):
    """watch: what watch.sh runs on the head when it finds a failure, besides restarting."""

    on_failure: str | None  # a command for sh -c on the head; None: none


@dataclass(frozen=True)
class Spec:
    name: str
    cluster: Cluster
    container: Container
    model: Model
    engine: Engine
    launch: Launch
    watch: Watch = Watch(("watch",), frozenset(), None)
    # What the user wrote, for a rule that must see every string at its own path (rules_cluster.plain_values).
    given: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
