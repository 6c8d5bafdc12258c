"""The typed spec (compiler.spec.typed) built from the validated spec: once, right after validation, with the
schema's defaults filled in and the keys the user wrote remembered for provenance."""

from __future__ import annotations

import json
from typing import Any

from compiler.spec.typed import (
    HF_CONTAINER_CACHE,
    LOG_MAX_FILE,
    LOG_MAX_SIZE,
    Architecture,
    Backend,
    Cluster,
    Container,
    ControlPlane,
    Draft,
    DraftMethod,
    Engine,
    EngineKind,
    EntrypointMode,
    Fabric,
    FabricTransport,
    HfCache,
    Hooks,
    HostHooks,
    ImageBuild,
    Launch,
    Logs,
    Model,
    Mount,
    Node,
    Spec,
    Ssh,
    Topology,
    Watch,
)


def env_text(value: Any) -> str:
    """An env value as the container sees it: booleans as 1/0, numbers as written."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def build_spec(full: dict[str, Any], given: dict[str, Any]) -> Spec:
    """`full` is the valid spec with the schema's defaults filled in; `given` is what the user wrote."""
    g = _Given(given)
    cluster, container, model, engine, launch = (
        full["cluster"],
        full["container"],
        full["model"],
        full["engine"],
        full["launch"],
    )
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
            data_parallel_rpc_port=launch["data_parallel_rpc_port"],
            ray_object_store_memory=launch["ray_object_store_memory"],
            nccl_check=launch.get("nccl_check"),
            drop_page_cache=launch["drop_page_cache"],
            probe=launch.get("probe"),
            mpi_ssh_port=launch["mpi_ssh_port"],
        ),
        watch=Watch(("watch",), g.keys("watch"), full.get("watch", {}).get("on_failure")),
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


# A single node without a fabric talks to itself: every address the engine and NCCL are given is loopback.
LOOPBACK = {"ip": "127.0.0.1", "netdev": "lo", "hcas": [], "addresses": {}, "transport": "sockets"}


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {name: env_text(value) for name, value in values.items()}


def _cluster(cluster: dict[str, Any], g: _Given) -> Cluster:
    ssh = cluster["ssh"]
    nodes = []
    for i, node in enumerate(cluster["nodes"]):
        path = ("cluster", "nodes", i)
        fabric, control = node.get("fabric", LOOPBACK), node.get("control")
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
                    addresses=dict(fabric["addresses"]),
                    transport=FabricTransport(fabric["transport"]),
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
        link_prefix_length=cluster["link_prefix_length"],
        nodes=tuple(nodes),
        hooks=HostHooks(("cluster", "hooks"), g.keys("cluster", "hooks"), tuple(h["pre_launch"]), h["sudo"])
        if (h := cluster.get("hooks")) is not None
        else None,
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
        build=ImageBuild(
            ("container", "build"), g.keys("container", "build"), b["context"], b["dockerfile"], _env(b["args"])
        )
        if (b := container.get("build")) is not None
        else None,
        cache=container["cache"].get("enabled", True),
        cache_host=container["cache"].get("host"),
        logs=Logs(
            ("container", "logs"),
            g.keys("container", "logs"),
            max_size=container["logs"].get("max_size", LOG_MAX_SIZE),
            max_file=container["logs"].get("max_file", LOG_MAX_FILE),
        ),
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
        data_parallel=engine["data_parallel"],
        expert_parallel=engine["expert_parallel"],
        # Plain values (the loader's mappings keep positions): they are written into a YAML file as they are.
        llm_api_options=json.loads(json.dumps(engine.get("llm_api_options", {}))),
    )


def build_model(model: dict[str, Any], g: _Given) -> Model:
    arch = model.get("architecture", {})
    hf = _hf_cache(model, g)
    # The Hugging Face form: the snapshot, as the container sees it, sits where the cache's layout puts it
    # (its files are links into ../../blobs, mounted beside it).
    path = model["path"] if hf is None else f"{hf.repo_folder}/snapshots/{hf.revision}"
    default_mount = (
        path if hf is None else f"{HF_CONTAINER_CACHE}/{hf.repo_folder.rpartition('/')[2]}/snapshots/{hf.revision}"
    )
    return Model(
        ("model",),
        g.keys("model"),
        path=path,
        mount=model.get("mount", default_mount),
        name=model.get("name", hf.repo if hf else None),
        architecture=Architecture(
            ("model", "architecture"),
            g.keys("model", "architecture"),
            attention_heads=arch.get("attention_heads"),
            kv_heads=arch.get("kv_heads"),
            experts=arch.get("experts"),
        ),
        draft=_draft(model.get("draft"), g),
        revision=model.get("revision"),
        hf=hf,
        size_gb=model.get("size_gb"),
        repo=model.get("repo"),
        aliases=tuple(model.get("aliases", ())),
    )


def _hf_cache(model: dict[str, Any], g: _Given) -> HfCache | None:
    if "hf_cache" not in model:
        return None
    return HfCache(("model",), g.keys("model"), model["hf_cache"], model.get("repo", ""), model.get("revision", "main"))


def _draft(draft: dict[str, Any] | None, g: _Given) -> Draft | None:
    if draft is None:
        return None
    return Draft(
        ("model", "draft"),
        g.keys("model", "draft"),
        path=draft.get("path"),
        mount=draft.get("mount", draft.get("path")),
        method=DraftMethod(draft["method"]),
        num_speculative_tokens=draft.get("num_speculative_tokens"),
        prompt_lookup_min=draft.get("prompt_lookup_min"),
        repo=draft.get("repo"),
        prompt_lookup_max=draft.get("prompt_lookup_max"),
    )
