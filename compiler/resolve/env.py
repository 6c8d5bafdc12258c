"""Each node's container environment: fabric, NCCL, Ray and engine variables, then the spec's own."""

from __future__ import annotations

from compiler.plan import Setting
from compiler.resolve.context import Deployment
from compiler.spec import Backend, Node, Source, Topology

# Variables that carry one node's fabric interface; a cluster-wide override defeats per-node resolution.
IFNAME_VARS = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
)


def node_env(d: Deployment, node: Node) -> tuple[Setting, ...]:
    """Later layers win: derived, then the image's adapt variables, then container.env, engine.env, the node's env."""
    settings = _fabric(d, node) + d.engine.node_env(d, node) + _runtime(d)
    settings += d.entrypoint.adapt_env
    for section, env in (
        ("container.env", d.spec.container.env),
        ("engine.env", d.spec.engine.env),
        ("cluster.nodes", node.env),
    ):
        settings += tuple(Setting(name, env[name], Source.SPEC, f"{section} ({name})") for name in sorted(env))
    merged = {s.name: s for s in settings}
    return tuple(merged[name] for name in sorted(merged))


def _fabric(d: Deployment, node: Node) -> tuple[Setting, ...]:
    fabric = node.fabric
    settings = [
        Setting(name, fabric.netdev, Source.DERIVED, "this node's fabric netdev (cluster.nodes[].fabric.netdev)")
        for name in IFNAME_VARS
    ]
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
        settings.append(
            Setting("NCCL_IB_DISABLE", "1", Source.DERIVED, "the node lists no RDMA devices: NCCL uses sockets")
        )
    launch = d.spec.launch
    settings += [
        Setting("MASTER_ADDR", d.head.fabric.ip, Source.DERIVED, "the head's fabric IP"),
        Setting("MASTER_PORT", str(launch.master_port), launch.source("master_port"), "launch.master_port"),
    ]
    if d.backend is Backend.RAY:
        settings += [
            Setting("RAY_NODE_IP_ADDRESS", fabric.ip, Source.DERIVED, "this node's fabric IP"),
            Setting("RAY_OVERRIDE_NODE_IP_ADDRESS", fabric.ip, Source.DERIVED, "this node's fabric IP"),
            Setting("RAY_memory_monitor_refresh_ms", "0", Source.DEFAULT, "Ray's OOM killer misreads unified memory"),
        ]
    return tuple(settings)


def _runtime(d: Deployment) -> tuple[Setting, ...]:
    settings = [
        Setting(
            "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", Source.DEFAULT, "unified memory: less fragmentation"
        ),
        Setting("HF_HUB_OFFLINE", "1", Source.DEFAULT, "weights are local: no node downloads on its own"),
    ]
    topology = d.topology
    if topology in (Topology.MESH, Topology.RING):
        why = f"topology {topology}: no switch between the nodes"
        settings += [
            Setting("NCCL_IB_SUBNET_AWARE_ROUTING", "1", Source.DERIVED, why),
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
