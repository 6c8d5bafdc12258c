"""The validated spec as typed, frozen values, built once right after validation.

Every section knows where it sits in the spec (`location`) and which of its keys the user wrote (`given`), so
provenance travels with the values: `source("port")` is `spec` or `default`. Env values are already strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from compiler.diagnostics import Path

if TYPE_CHECKING:
    from compiler.spec_model import Draft, HfCache


class Source(StrEnum):
    """Where a resolved value came from."""

    SPEC = "spec"  # the user wrote it
    DEFAULT = "default"  # sparkc's (or the schema's) default
    PROFILE = "profile"  # the image profile: what the image's entrypoint does
    DERIVED = "derived"  # computed from other values


class EngineKind(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"


class Backend(StrEnum):
    RAY = "ray"
    NATIVE = "native"  # the engine's own multi-node group (or a single node)


class EntrypointMode(StrEnum):
    AUTO = "auto"
    BYPASS = "bypass"
    ADAPT = "adapt"
    KEEP = "keep"


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


@dataclass(frozen=True)
class Cluster(Section):
    ssh: Ssh
    head: str | None
    topology: Topology | None
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Mount(Section):
    host: str
    container: str
    readonly: bool


@dataclass(frozen=True)
class Hooks(Section):
    pre_engine: tuple[str, ...]  # each run by sh -c inside the container, in order
    patches: str | None  # a folder beside the spec, mounted read-only into every container


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
    hooks: Hooks | None = None


@dataclass(frozen=True)
class Architecture(Section):
    attention_heads: int | None
    kv_heads: int | None
    experts: int | None


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


@dataclass(frozen=True)
class Engine(Section):
    kind: EngineKind
    backend: Backend | None
    tensor_parallel: int
    pipeline_parallel: int
    port: int | None
    host: str
    max_model_len: int | None
    gpu_memory_utilization: int | float | None
    trust_remote_code: bool
    reasoning_parser: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    kv_cache_memory: int | str | None  # a size as written (sizes.size_bytes: bytes per GPU)


@dataclass(frozen=True)
class Launch(Section):
    timeout: int
    ray_port: int
    master_port: int
    ray_object_store_memory: int
    nccl_check: bool | None
    drop_page_cache: bool
    probe: bool | None


@dataclass(frozen=True)
class Spec:
    name: str
    cluster: Cluster
    container: Container
    model: Model
    engine: Engine
    launch: Launch
    # What the user wrote, for a rule that must see every string at its own path (rules_cluster.plain_values).
    given: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def env_text(value: Any) -> str:
    """An env value as the container sees it: booleans as 1/0, numbers as written."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def build_spec(full: dict[str, Any], given: dict[str, Any]) -> Spec:
    """`full` is the valid spec with the schema's defaults filled in; `given` is what the user wrote."""
    from compiler.spec_model import build_model  # it builds on this module's types

    g = _Given(given)
    cluster, container, model, engine, launch = (full[k] for k in ("cluster", "container", "model", "engine", "launch"))
    return Spec(
        name=full["name"],
        cluster=_cluster(cluster, g),
        container=_container(container, g),
        model=build_model(model, g),
        engine=_engine(engine, g),
        launch=Launch(
            ("launch",),
            g.keys("launch"),
            timeout=launch["timeout"],
            ray_port=launch["ray_port"],
            master_port=launch["master_port"],
            ray_object_store_memory=launch["ray_object_store_memory"],
            nccl_check=launch.get("nccl_check"),
            drop_page_cache=launch["drop_page_cache"],
            probe=launch.get("probe"),
        ),
        given=given,
    )


class _Given:
    """The keys the user wrote, section by section."""

    def __init__(self, given: dict[str, Any]) -> None:
        self._given = given

    def keys(self, *path: str | int) -> frozenset[str]:
        node: Any = self._given
        for part in path:
            found = part in node if isinstance(node, dict) else isinstance(part, int) and part < len(node)
            if not found:
                return frozenset()
            node = node[part]
        return frozenset(node) if isinstance(node, dict) else frozenset()


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {name: env_text(value) for name, value in values.items()}


def _cluster(cluster: dict[str, Any], g: _Given) -> Cluster:
    ssh = cluster["ssh"]
    nodes = []
    for i, node in enumerate(cluster["nodes"]):
        path = ("cluster", "nodes", i)
        fabric, control = node["fabric"], node.get("control")
        nodes.append(
            Node(
                path,
                g.keys(*path),
                index=i,
                name=node["name"],
                ssh=node.get("ssh"),
                fabric=Fabric(
                    (*path, "fabric"),
                    g.keys(*path, "fabric"),
                    ip=fabric["ip"],
                    netdev=fabric["netdev"],
                    netdevs=tuple(fabric.get("netdevs", [fabric["netdev"]])),
                    hcas=tuple(fabric["hcas"]),
                ),
                control=ControlPlane((*path, "control"), g.keys(*path, "control"), control["netdev"], control["ip"])
                if control
                else None,
                gpus=node["gpus"],
                env=_env(node["env"]),
                memory_gb=node["memory_gb"],
            )
        )
    topology = cluster.get("topology")
    return Cluster(
        ("cluster",),
        g.keys("cluster"),
        ssh=Ssh(
            ("cluster", "ssh"),
            g.keys("cluster", "ssh"),
            user=ssh.get("user"),
            port=ssh["port"],
            identity_file=ssh.get("identity_file"),
            connect_timeout=ssh["connect_timeout"],
            options=tuple(ssh["options"]),
        ),
        head=cluster.get("head"),
        topology=Topology(topology) if topology else None,
        nodes=tuple(nodes),
    )


def _container(container: dict[str, Any], g: _Given) -> Container:
    mounts = tuple(
        Mount(("container", "mounts", i), g.keys("container", "mounts", i), m["host"], m["container"], m["readonly"])
        for i, m in enumerate(container["mounts"])
    )
    return Container(
        ("container",),
        g.keys("container"),
        image=container["image"],
        entrypoint=EntrypointMode(container["entrypoint"]),
        privileged=container["privileged"],
        gpus=container["gpus"],
        ulimits={k: None if v is None else str(v) for k, v in container["ulimits"].items()},
        mounts=mounts,
        shm_size=container.get("shm_size"),
        env=_env(container["env"]),
        secrets=tuple(container["secrets"]),
        hooks=Hooks(("container", "hooks"), g.keys("container", "hooks"), tuple(h["pre_engine"]), h.get("patches"))
        if (h := container.get("hooks")) is not None
        else None,
        cache=container["cache"].get("enabled", True),
        cache_host=container["cache"].get("host"),
    )


def _engine(engine: dict[str, Any], g: _Given) -> Engine:
    backend = engine.get("backend")
    return Engine(
        ("engine",),
        g.keys("engine"),
        kind=EngineKind(engine["kind"]),
        backend=Backend(backend) if backend else None,
        tensor_parallel=engine["tensor_parallel"],
        pipeline_parallel=engine["pipeline_parallel"],
        port=engine.get("port"),
        host=engine["host"],
        max_model_len=engine.get("max_model_len"),
        gpu_memory_utilization=engine.get("gpu_memory_utilization"),
        trust_remote_code=engine["trust_remote_code"],
        reasoning_parser=engine.get("reasoning_parser"),
        args=tuple(engine["args"]),
        env=_env(engine["env"]),
        kv_cache_memory=engine.get("kv_cache_memory"),
    )
