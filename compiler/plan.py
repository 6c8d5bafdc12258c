"""The resolved plan: every value concrete, typed, with where it came from. Frozen; templates only read it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from compiler.spec.patches import PatchFile
from compiler.spec.typed import Backend, EngineKind, EntrypointMode, Source, Topology

# A command line as groups of words: a flag with its value, or one word alone. The words are what
# runs; the groups only decide how a reviewer sees them (one group per line).
Words = tuple[str, ...]
Command = tuple[Words, ...]


def flat(command: Iterable[Words]) -> tuple[str, ...]:
    """The words of a command, in order, as they are executed."""
    return tuple(word for group in command for word in group)


class Role(StrEnum):
    HEAD = "head"
    WORKER = "worker"


class Transport(StrEnum):
    """What NCCL must report in a node's container log."""

    IB = "IB"
    SOCKET = "Socket"
    UNCHECKED = ""  # nothing is logged there (Ray workers, mpirun's remote ranks: the head's log speaks for them)


@dataclass(frozen=True)
class Setting:
    """One resolved value and its provenance."""

    name: str
    value: str
    source: Source
    why: str = ""


@dataclass(frozen=True)
class Effective:
    """What the spec asked for against what will really happen (entrypoints can disagree)."""

    setting: str
    requested: str
    effective: str
    source: Source  # where the effective value came from
    reason: str = ""

    @property
    def differs(self) -> bool:
        return self.requested != self.effective


@dataclass(frozen=True)
class HeadPort:
    """A port the head must have free before anything starts."""

    port: int
    what: str


@dataclass(frozen=True)
class MemoryBudget:
    """What a deployment takes of one node's memory, against what the node has for engines."""

    bytes: int  # 0: not known at compile time
    room: int  # the node's memory_gb less what its OS keeps
    how: str  # how the budget was reckoned, in words
    setting: str  # the spec field that sets it, dotted (engine.gpu_memory_utilization)


@dataclass(frozen=True)
class EngineMetrics:
    """The samples status.sh reads from the engine's Prometheus text on the API port's /metrics, by name.
    Each is summed over its labels (one sample per engine under data parallel); the KV cache's share is
    averaged. `note` says where the engine serves them only when told to (shown when /metrics fails)."""

    running: str  # gauge: requests being generated now
    waiting: str  # gauge: requests queued
    kv_usage: tuple[str, ...]  # gauge, 0 to 1: the first name present counts (newer releases' name first)
    prompt_tokens: str  # counter sample (`_total`): prompt tokens processed
    generation_tokens: str  # counter sample: tokens generated
    note: str = ""


@dataclass(frozen=True)
class StartGate:
    """What the engine demands of a node's free memory as it starts, on unified memory (a Spark): at least
    `fraction` of the node's total memory free once its own init has taken `overhead` bytes, or it refuses."""

    fraction: str  # as the engine reads it (0.85)
    overhead: int  # bytes the engine's own init takes before it measures
    engine: str  # the engine's name, for messages
    setting: str  # the spec field that sets the fraction, dotted
    source: str  # where the fraction comes from, in words

    @property
    def ppm(self) -> int:
        """The fraction in millionths, for the launcher's integer arithmetic."""
        return round(float(self.fraction) * 1_000_000)

    @property
    def overhead_kb(self) -> int:
        """The overhead in KiB, as /proc/meminfo counts."""
        return self.overhead // 1024


@dataclass(frozen=True)
class PortControl:
    """How `launch-cluster.sh --port` reaches the engine: the word after `flag`, or the value of `variable`
    in `docker run -e`; neither where the image's entrypoint decides the port itself (`fixed` says why)."""

    flag: str
    variable: str
    fixed: str
    taken: tuple[HeadPort, ...]  # the head's other ports, which the API may not take at launch either


@dataclass(frozen=True)
class PortWord:
    """A word of a compiled command that carries the API's port: word `word` of group `group`, written as
    `prefix` then the port. `launch-cluster.sh --port` rewrites exactly these words, nothing it would have to find."""

    group: int
    word: int
    prefix: str  # "" (a flag's value word), "--port=" (one word), "PORT=" (an adapted entrypoint's variable), a label


@dataclass(frozen=True)
class Planes:
    """A node whose spec separates the control plane from the data plane."""

    control_netdev: str  # Gloo, TensorPipe, the rendezvous and Ray live here ...
    control_ip: str  # ... at this address
    data_netdevs: tuple[str, ...]  # NCCL's sockets and Open MPI use these


@dataclass(frozen=True)
class CopyRoute:
    """How distribute.sh reaches one worker: from `source` (the head, or a node that passes the copy on) over
    `targets` (user@address, one per cable or twin); `cabled` False: no cable path, the control network."""

    node: str
    source: str
    targets: tuple[str, ...]
    cabled: bool


@dataclass(frozen=True)
class NodePlan:
    name: str
    role: Role
    rank: int  # head is 0; workers 1.. in spec order
    ssh_target: str  # user@host, or "" when the node is the head (commands run locally)
    fabric_ip: str
    netdev: str
    hcas: tuple[str, ...]
    gpus: int
    container_name: str
    env: tuple[Setting, ...]  # sorted by name
    docker_run: Command  # the whole `docker run ...`
    nccl_transport: Transport
    probe_run: Command  # the fabric probe's `docker run`, up to the image (() when there is no probe)
    fabric_target: str  # user@fabric IP: where copies to this node go (ssh over the fabric)
    planes: Planes | None = None  # None: the fabric netdev carries everything
    budget: MemoryBudget | None = None  # None only in plans built by hand
    ports: tuple[HeadPort, ...] = ()  # the fixed ports the deployment listens on at this node
    fabric_addresses: tuple[tuple[str, str], ...] = ()  # fabric.addresses: (netdev, IPv4), checked at preflight
    cabled: bool = True  # False: one node without a fabric, on loopback; its link is not checked
    api_port_words: tuple[PortWord, ...] = ()  # where docker_run carries the API's port
    probe_api_port_words: tuple[PortWord, ...] = ()  # where probe_run does (the engine's environment)

    @property
    def checked_netdev(self) -> str:
        """The fabric netdev the preflight checks; "" where there is none."""
        return self.netdev if self.cabled else ""

    @property
    def control_netdev(self) -> str:
        return self.planes.control_netdev if self.planes else self.netdev

    @property
    def control_ip(self) -> str:
        return self.planes.control_ip if self.planes else self.fabric_ip

    @property
    def data_netdevs(self) -> tuple[str, ...]:
        return self.planes.data_netdevs if self.planes else (self.netdev,)

    @property
    def data_netdevs_words(self) -> str:
        """The data netdevs as one space-separated value (interface names hold no spaces)."""
        return " ".join(self.data_netdevs)

    @property
    def memory_room(self) -> int:
        return self.budget.room if self.budget else 0

    @property
    def has_rdma(self) -> bool:
        return bool(self.hcas)


@dataclass(frozen=True)
class ProfileCheck:
    """What the launcher confirms about the image at run time (docker image inspect on the head)."""

    entrypoint_json: str  # as docker prints {{json .Config.Entrypoint}}; "" when the profile does not pin it
    # keep only: NAME=VALUE the plan assumed for each variable the entrypoint reads; the image must not
    # bake another value (adapt sets them all, bypass does not run the entrypoint)
    env_defaults: tuple[str, ...]
    fatal: bool  # keep/adapt rely on the profile: a mismatch stops the launch; bypass only warns
    # sha256 of the entrypoint's file (its first word) as the profile was written from it; "" not recorded
    entrypoint_sha256: str = ""
    entrypoint_path: str = ""


# Where a hooks patch folder goes: beside the scripts in the output folder, and inside every container.
# The launcher adds seconds in bash's 64-bit arithmetic (SECONDS + SPARKC_TIMEOUT); a larger budget wraps to a
# negative deadline and the launch fails at once. 2^31 - 1 seconds is 68 years. Compile and the
# launcher's --timeout both hold to it.
MAX_LAUNCH_TIMEOUT = 2**31 - 1
PATCHES_DIR = "patches"
PATCHES_MOUNT = "/sparkc/patches"
# Stands for the node's copy of the patch folder in `docker run -v`; the launcher puts the real path in.
PATCHES_PLACEHOLDER = "@patches@"
# A container.mounts host path under ~/ is written as the spec has it, in `docker run -v` too (PLAN.md and the
# manifest show it so); the launcher puts each node's home (its ssh user's, asked at launch) for the ~.
HOME_PLACEHOLDER = "~"


@dataclass(frozen=True)
class HomeMount:
    """A container.mounts entry whose host path is under ~/."""

    index: int  # in container.mounts
    host: str  # as the spec wrote it: ~/...


@dataclass(frozen=True)
class HookPlan:
    """container.hooks, as every container runs them, with hashes for the record."""

    pre_engine: tuple[str, ...]
    pre_engine_sha256: str  # over the commands, in order
    patches: tuple[PatchFile, ...]
    patches_sha256: str  # over every file's path and hash; "" without a patch folder


@dataclass(frozen=True)
class HostHookPlan:
    """cluster.hooks: what the launcher runs on every node's host before the containers start."""

    pre_launch: tuple[str, ...]  # each by sh -c on the host, in order, head first
    sudo: bool  # through sudo -n, as root; else as the ssh user
    nodes: tuple[str, ...]  # where they run, in order
    sha256: str  # over the commands, in order, and how they run

    @property
    def runs_as(self) -> str:
        return "root, through sudo -n" if self.sudo else "the ssh user"


# backend mpi: the word in a container's command that the launcher replaces with the library's sshd script
# (every container runs sshd for mpirun), and the prefix of a `-v` source it replaces with the build folder.
MPI_SSHD_PLACEHOLDER = "@sparkc-mpi-sshd@"
BUILD_PLACEHOLDER = "@build@"

# Where bench.sh mounts its results folder in the benchmark's container.
BENCH_RESULTS = "/sparkc-bench"


@dataclass(frozen=True)
class BenchPlan:
    """bench.sh: the engine's serving benchmark in the deployment's image on the head, against the endpoint."""

    command: Words  # the engine's benchmark, its @...@ words filled in by the script
    mounts: Command  # the weights, read-only (the benchmark reads the tokenizer there), and container.mounts
    env: Command  # container.env, as `-e NAME=VALUE` groups
    snapshot_ref: str  # a Hugging Face cache's refs/<branch>: its commit replaces SNAPSHOT_PLACEHOLDER; else ""
    tokenizer: str  # the weights' folder in the container
    concurrencies: tuple[int, ...]  # the default levels; --concurrency changes them
    input_len: int
    output_len: int
    container_name: str


class FetchMode(StrEnum):
    CACHE = "cache"  # into a Hugging Face cache (model.hf_cache): models--ORG--NAME/{refs,snapshots,blobs}
    FOLDER = "folder"  # into the weights' folder itself (model.path)


@dataclass(frozen=True)
class FetchPlan:
    """What fetch-model.sh downloads on the head, inside the deployment's image, and where to."""

    repo: str  # ORG/NAME; "" when the spec names none (the script then says what to add)
    revision: str  # a commit, branch or tag
    target: str  # the host folder: the cache's hub folder, or the weights' folder
    mode: FetchMode
    container_name: str  # the download's container, removed when it ends
    # The draft model's repo and folder (folder mode, its main revision); "" where the spec names none.
    draft_repo: str = ""
    draft_target: str = ""


# build-image.sh writes the ID of the image it built here, beside the scripts.
BUILT_IMAGE_RECORD = "built-image.txt"


@dataclass(frozen=True)
class BuildPlan:
    """What build-image.sh builds on the head: docker build of `context` with `dockerfile` and `args`, tagged
    with the deployment's image, before distribute.sh copies that image on."""

    context: str  # the folder on the head
    dockerfile: str  # its path as docker build's -f takes it: context/dockerfile
    args: tuple[str, ...]  # NAME=VALUE, one --build-arg each, in the spec's order


@dataclass(frozen=True)
class ServicePlan:
    """The systemd unit that brings the deployment back after a reboot (on the head)."""

    unit: str  # sparkc-<name>.service
    folder: str  # where install-service.sh links the build folder; the unit runs the scripts there
    start_timeout: int  # seconds systemd lets launch-cluster.sh run: the launch budget and its slack
    stop_timeout: int
    restart_sec: int  # the pause before another start after a failed one
    start_limit_burst: int  # at most this many starts ...
    start_limit_interval: int  # ... in this many seconds; then systemd gives up until told otherwise
    watch_unit: str = ""  # sparkc-<name>-watch.service: watch.sh, started after the unit above


@dataclass(frozen=True)
class ModelPlan:
    """What the launcher checks and prepares about the weights on every node before anything starts."""

    revision: str  # as the spec gives it; "" when it names none
    folder: str  # the host folder checked: the weights, or the Hugging Face repo folder (models--ORG--NAME)
    hf: str  # "ref": a branch or tag read from refs/ on the nodes; "pinned": a commit; "": not a cache
    snapshot_placeholder: str  # in `docker run` words, replaced by the commit refs/ names ("" unless hf is ref)
    draft_folder: str  # the draft model's host folder; "" when none
    speculative: str  # speculative decoding as the engine runs it, in words; "" when none
    drop_page_cache: bool  # sync and drop the page cache on every node before the containers start
    aliases: tuple[str, ...] = ()  # the names the model is also served under, after served_model_name


@dataclass(frozen=True)
class Plan:
    sparkc_version: str
    spec_path: str
    spec_sha256: str
    name: str
    engine_kind: EngineKind
    backend: Backend  # single-node runs are native with one node
    topology: Topology  # how the fabric is cabled, as the spec says or its default for the node count
    image: str
    profile: str  # profile id, "" when unknown
    entrypoint_mode: EntrypointMode  # never auto: already decided
    head: str
    head_fabric_ip: str  # where the head's rendezvous and Ray listen: its control IP where the spec gives one
    nodes: tuple[NodePlan, ...]  # head first, then workers in spec order
    start_waves: tuple[tuple[str, ...], ...]  # containers started together, wave after wave
    ray_engine: Command  # Ray or MPI: the engine's command, run in the head's container once the group formed; else ()
    api_port: int  # effective
    probe_host: str  # where the launcher on the head reaches the API
    api_bind_host: str  # where the engine binds the API (its host, 0.0.0.0 by default)
    probe_url: str  # http://SPARKC_PROBE_HOST:PORT, an IPv6 address in brackets
    endpoint_url: str  # what to tell the operator
    probe_url_host: str  # SPARKC_PROBE_HOST as a URL writes it (IPv6 in brackets); the launch adds its port
    endpoint_host: str  # the same for endpoint_url
    served_model_name: str  # effective
    model_host_path: str
    mount_sources: tuple[str, ...]  # container.mounts' host paths: preflight checks each on every node
    home_mounts: tuple[HomeMount, ...]  # the container.mounts under ~/: each node's ssh user's home
    ray_port: int
    master_port: int
    ray_required: bool  # preflight checks the image for ray
    ray_expected_ips: tuple[str, ...]
    total_gpus: int
    nccl_check: bool  # the launcher reads NCCL's transport lines after readiness
    probe: bool  # one all-reduce across the nodes before the engine starts
    probe_port: int
    probe_timeout: int  # seconds the probe program gives itself; the launcher waits a little longer
    cache_host: str  # the engines' compile caches on every node; "" when off
    head_ports: tuple[HeadPort, ...]
    api_port_control: PortControl
    launch_timeout: int
    engine_timeout: int
    engine_timeout_margin: int  # engine_timeout = launch timeout - this (at least 30), also for --timeout
    engine_timeout_variable: str  # where the engine reads it: a variable ("" if none) ...
    engine_timeout_flag: str  # ... or a flag's value ("" if none)
    ssh_options: Command
    secrets: tuple[str, ...]
    api_key_variable: str  # the secret the engine reads its API key from; "" if none
    api_key_given: str  # the key engine.args gives (--api-key); "" if none
    effective: tuple[Effective, ...]
    quirks: tuple[str, ...]  # what the profile told us and how it was applied
    settings: tuple[Setting, ...]  # cluster-wide resolved values, for explain and the manifest
    profile_check: ProfileCheck
    model: ModelPlan
    hooks: HookPlan | None = None  # None: the spec has no container.hooks
    host_hooks: HostHookPlan | None = None  # None: the spec has no cluster.hooks
    service: ServicePlan | None = None  # the systemd unit; None only in plans built by hand
    fetch: FetchPlan | None = None  # fetch-model.sh; None only in plans built by hand
    bench: BenchPlan | None = None  # bench.sh; None only in plans built by hand
    build: BuildPlan | None = None  # build-image.sh; None: the image is pulled, not built (no container.build)
    # Where the spec takes its cluster section from a file: that file, its sha256 and the spec's own (spec_sha256
    # then covers both files, so the scripts notice a changed cluster file).
    engine_files: tuple[tuple[str, str], ...] = ()  # the engine's own files in the build folder: (path, text)
    mpi_ssh_port: int = 0  # backend mpi: sshd's port in every container; else 0
    mpi_sshd_from_hooks: bool = False  # backend mpi: a pre_engine hook installs sshd (preflight only notes its absence)
    start_gate: StartGate | None = None  # the engine's start check of free memory; None: it has none
    metrics: EngineMetrics | None = None  # what status.sh reads on /metrics; None: the engine serves none
    metrics_absent: str = ""  # why the engine serves no Prometheus metrics, in words ("" where it does)
    engine_api_port_words: tuple[PortWord, ...] = ()  # where ray_engine carries the API's port
    cluster_file: str = ""
    cluster_file_sha256: str = ""
    spec_file_sha256: str = ""
    copy_routes: tuple[CopyRoute, ...] = ()  # distribute.sh's route to each worker; () only in plans built by hand
    watch_on_failure: str = ""  # watch.on_failure: run on the head by sh -c when watch.sh finds a failure

    @property
    def head_node(self) -> NodePlan:
        return next(n for n in self.nodes if n.name == self.head)

    @property
    def workers(self) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.role is Role.WORKER)


@dataclass(frozen=True)
class GatewayRoute:
    """One model name the gateway answers for, and the deployment it sends those requests to."""

    model_name: str  # the `model` a request names: a served model name or one of its aliases
    deployment: str
    spec_path: str
    api_base: str  # the deployment's OpenAI-compatible base URL, as the gateway on its node reaches it
    api_key_variable: str  # the variable the deployment's API key is read from; "" when it needs none


@dataclass(frozen=True)
class GatewayPlan:
    """One OpenAI-compatible address for deployments compiled together: a LiteLLM proxy on the first one's head."""

    sparkc_version: str
    node: str  # the node it runs on (the first deployment's head)
    image: str
    port: int
    container_name: str
    address: str  # what to tell the operator: http://HOST:PORT
    key_variable: str  # the variable the gateway's own key is read from; "" when it requires none
    routes: tuple[GatewayRoute, ...]  # in spec order, each deployment's served name first, then its aliases
    specs: tuple[str, ...]  # the deployments' spec files, in the order given
    mounts: tuple[tuple[str, str], ...] = ()  # (host path, container path), read-only: certificates, a local LiteLLM

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable the container reads a key from, each once, sorted."""
        names = {r.api_key_variable for r in self.routes} | {self.key_variable}
        return tuple(sorted(n for n in names if n))
