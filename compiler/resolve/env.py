"""Each node's container environment: fabric, NCCL, Ray and engine variables, then the spec's own."""

from __future__ import annotations

import json

from compiler.plan import Setting
from compiler.resolve.cache import cache_env
from compiler.resolve.context import Deployment
from compiler.spec.typed import Backend, Node, Source, Topology

# Variables that carry one node's fabric interface; a cluster-wide override defeats per-node resolution.
IFNAME_VARS = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
)
# Variables sparkc sets from one node's own fabric: never the same thing on another node.
PER_NODE_NAMES = (
    *IFNAME_VARS,
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "NCCL_IB_GID_INDEX",
    "VLLM_HOST_IP",
    "SGLANG_HOST_IP",
    "RAY_NODE_IP_ADDRESS",
    "RAY_OVERRIDE_NODE_IP_ADDRESS",
)


# Where the head's vLLM reads which variables its Ray executor must not copy to the workers.
RAY_CONFIG_ROOT = "/tmp/sparkc-vllm-config"


def node_envs(d: Deployment) -> dict[str, tuple[Setting, ...]]:
    """Each node's container environment, by node name, sorted by variable. Later layers win: derived,
    then the image's adapt variables, then container.env, engine.env, the node's env."""
    layers = {node.name: {s.name: s for s in _layers(d, node)} for node in d.nodes}
    kept = _ray_per_node_names(d, list(layers.values()))
    envs = {}
    for name, merged in layers.items():
        if kept:
            merged.update((s.name, s) for s in _ray_carry_over(d, kept) if s.name not in merged)
        envs[name] = tuple(merged[key] for key in sorted(merged))
    return envs


def _ray_per_node_names(d: Deployment, layers: list[dict[str, Setting]]) -> tuple[str, ...]:
    """Per-node variables the engine's Ray executor would otherwise copy from the head to every worker
    (vLLM copies VLLM_*, NCCL_*, UCX_*, HF_* ...): each worker must keep its own netdev, HCAs, GID."""
    prefixes = d.engine.ray_carried_prefixes
    if d.backend is not Backend.RAY or not prefixes:
        return ()
    names = set().union(*layers)
    per_node = {n for n in names if len({env[n].value if n in env else None for env in layers}) > 1}
    per_node |= set(PER_NODE_NAMES) | {n for node in d.nodes for n in node.env}
    return tuple(sorted(n for n in per_node & names if n.startswith(prefixes)))


def _ray_carry_over(d: Deployment, names: tuple[str, ...]) -> tuple[Setting, ...]:
    why = "vLLM's Ray executor copies the head's VLLM_*, NCCL_*, UCX_*, HF_* to every worker, except these"
    return (
        Setting(
            "VLLM_CONFIG_ROOT", RAY_CONFIG_ROOT, Source.DERIVED, "where vLLM reads ray_non_carry_over_env_vars.json"
        ),
        Setting("SPARKC_RAY_NON_CARRY_OVER", json.dumps(list(names), separators=(",", ":")), Source.DERIVED, why),
    )


def _layers(d: Deployment, node: Node) -> tuple[Setting, ...]:
    settings = _fabric(d, node) + d.engine.node_env(d, node) + _runtime(d) + cache_env(d)
    settings += d.entrypoint.adapt_env
    for section, env in (
        ("container.env", d.spec.container.env),
        ("engine.env", d.spec.engine.env),
        ("cluster.nodes", node.env),
    ):
        settings += tuple(Setting(name, env[name], Source.SPEC, f"{section} ({name})") for name in sorted(env))
    return settings


def _fabric(d: Deployment, node: Node) -> tuple[Setting, ...]:
    fabric = node.fabric
    settings = list(interfaces(node, d.topology))
    if fabric.hcas:
        exact = any(h.startswith("=") for h in fabric.hcas)
        hca = ("=" if exact else "") + ",".join(h.lstrip("=") for h in fabric.hcas)
        settings += [
            Setting(
                "NCCL_IB_HCA", hca, Source.DERIVED, "this node's RDMA devices; without it NCCL can fall back to sockets"
            ),
            Setting("NCCL_IB_DISABLE", "0", Source.DERIVED, "the node lists RDMA devices"),
        ]
    else:
        settings.append(Setting("NCCL_IB_DISABLE", "1", Source.DERIVED, _why_no_rdma(node)))
    launch = d.spec.launch
    settings += [
        Setting("MASTER_ADDR", d.head.control_ip, Source.DERIVED, f"the head's {plane_ip(d.head)}"),
        Setting("MASTER_PORT", str(launch.master_port), launch.source("master_port"), "launch.master_port"),
    ]
    if d.backend is Backend.RAY:
        settings += [
            Setting("RAY_NODE_IP_ADDRESS", node.control_ip, Source.DERIVED, f"this node's {plane_ip(node)}"),
            Setting("RAY_OVERRIDE_NODE_IP_ADDRESS", node.control_ip, Source.DERIVED, f"this node's {plane_ip(node)}"),
            Setting("RAY_memory_monitor_refresh_ms", "0", Source.DEFAULT, "Ray's OOM killer misreads unified memory"),
        ]
    return tuple(settings)


def _why_no_rdma(node: Node) -> str:
    if not node.cabled:
        return "one node without a fabric: nothing crosses a network"
    if node.fabric.is_given("transport"):
        return "fabric.transport: sockets (NCCL over TCP on purpose)"
    return "the node lists no RDMA devices: NCCL uses sockets"


# The fabric's subnet size where no cable has its own (direct, switch): NVIDIA's /24, setup-fabric's default.
FABRIC_PREFIX = 24


def fabric_prefix(d: Deployment) -> int:
    """The prefix of the fabric's subnets: each cable's own in a mesh or ring, else the usual /24."""
    return d.spec.cluster.link_prefix_length if switchless(d.topology) else FABRIC_PREFIX


def switchless(topology: Topology) -> bool:
    """Mesh and ring: each CX-7 address reaches one neighbour, so only the control plane reaches every node."""
    return topology in (Topology.MESH, Topology.RING)


def split_planes(node: Node) -> bool:
    """The spec separates the node's control plane from its data plane (a control netdev, or data netdevs)."""
    return node.control is not None or node.fabric.is_given("netdevs")


def plane_ip(node: Node) -> str:
    """What the node's control-plane address is, for the why of a setting."""
    if not node.cabled:
        return "loopback address (one node without a fabric)"
    return "control IP (cluster.nodes[].control.ip)" if node.control else "fabric IP"


def interfaces(node: Node, topology: Topology) -> tuple[Setting, ...]:
    """The interface variables. One netdev carries everything unless the spec splits the planes: then
    Gloo and TensorPipe (one name each: Gloo crashes on lists) take the control netdev, NCCL's sockets
    and Open MPI the data netdevs, and UCX the RDMA devices in its device:port form. In a mesh or ring
    NCCL's bootstrap listens on one interface of NCCL_SOCKET_IFNAME, which on a cable reaches one
    neighbour only: every socket then goes over the control netdev, and RDMA over NCCL_IB_HCA."""
    fabric = node.fabric
    if switchless(topology) and node.control is not None:
        return _switchless_interfaces(node, node.control.netdev, topology)
    if not split_planes(node):
        why = "this node's fabric netdev (cluster.nodes[].fabric.netdev)" if node.cabled else "loopback: one node alone"
        return tuple(Setting(name, fabric.netdev, Source.DERIVED, why) for name in IFNAME_VARS)
    control = (
        "this node's control netdev (cluster.nodes[].control.netdev)"
        if node.control
        else "this node's fabric netdev (cluster.nodes[].fabric.netdev): the control plane"
    )
    data, data_why = ",".join(fabric.netdevs), "this node's data netdevs (cluster.nodes[].fabric.netdevs)"
    if fabric.hcas:
        ucx = ",".join(h.lstrip("=") if ":" in h else f"{h.lstrip('=')}:1" for h in fabric.hcas)
        ucx_why = "this node's RDMA devices, port 1 unless given (UCX's device:port form)"
    else:
        ucx, ucx_why = data, data_why
    return (
        Setting("NCCL_SOCKET_IFNAME", data, Source.DERIVED, data_why),
        Setting("GLOO_SOCKET_IFNAME", (node.control or node.fabric).netdev, Source.DERIVED, control),
        Setting("TP_SOCKET_IFNAME", (node.control or node.fabric).netdev, Source.DERIVED, control),
        Setting("UCX_NET_DEVICES", ucx, Source.DERIVED, ucx_why),
        Setting("OMPI_MCA_btl_tcp_if_include", data, Source.DERIVED, data_why),
    )


def _switchless_interfaces(node: Node, control: str, topology: Topology) -> tuple[Setting, ...]:
    why = (
        f"this node's control netdev (cluster.nodes[].control.netdev): in a {topology} a cable reaches one "
        "neighbour, NCCL's bootstrap and the sockets must reach every node"
    )
    settings = [Setting(name, control, Source.DERIVED, why) for name in IFNAME_VARS if name != "UCX_NET_DEVICES"]
    if node.fabric.hcas:
        ucx = ",".join(h.lstrip("=") if ":" in h else f"{h.lstrip('=')}:1" for h in node.fabric.hcas)
        ucx_why = "this node's RDMA devices, port 1 unless given (UCX's device:port form)"
        settings.append(Setting("UCX_NET_DEVICES", ucx, Source.DERIVED, ucx_why))
    else:
        settings.append(Setting("UCX_NET_DEVICES", control, Source.DERIVED, why))
    return tuple(sorted(settings, key=lambda s: IFNAME_VARS.index(s.name)))


def _runtime(d: Deployment) -> tuple[Setting, ...]:
    settings = [
        Setting(
            "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", Source.DEFAULT, "unified memory: less fragmentation"
        ),
        Setting("HF_HUB_OFFLINE", "1", Source.DEFAULT, "weights are local: no node downloads on its own"),
        Setting(
            "NCCL_IGNORE_CPU_AFFINITY",
            "1",
            Source.DEFAULT,
            "NCCL's threads may use every core, not the launcher's mask",
        ),
    ]
    if d.backend is Backend.RAY:
        settings.append(
            Setting("RAY_num_prestart_python_workers", "0", Source.DEFAULT, "no idle Python workers holding memory")
        )
    topology = d.topology
    if switchless(topology):
        why = f"topology {topology}: no switch between the nodes"
        cluster = d.spec.cluster
        settings += [
            Setting("NCCL_IB_SUBNET_AWARE_ROUTING", "1", Source.DERIVED, why),
            Setting(
                "NCCL_IB_SUBNET_PREFIX_LEN",
                str(cluster.link_prefix_length),
                cluster.source("link_prefix_length"),
                "cluster.link_prefix_length: each cable's own subnet, which NCCL matches between the ranks",
            ),
            Setting("NCCL_IB_MERGE_NICS", "0", Source.DERIVED, why),
            Setting("NCCL_NET_PLUGIN", "none", Source.DERIVED, why),
        ]
        if topology is Topology.RING:
            settings.append(Setting("NCCL_ALGO", "Ring", Source.DERIVED, "topology ring"))
    if d.nccl_check:
        settings += [
            Setting(
                "NCCL_DEBUG", "INFO", Source.DERIVED, "launch.nccl_check: the launcher reads NCCL's transport lines"
            ),
            Setting("NCCL_DEBUG_SUBSYS", "INIT,NET", Source.DERIVED, "launch.nccl_check: only what the check needs"),
        ]
    return tuple(settings)
