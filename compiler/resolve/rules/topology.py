"""Rules about how the fabric is cabled (direct, switch, mesh, ring). They only report."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.resolve.context import Deployment
from compiler.resolve.env import switchless
from compiler.spec.typed import Backend, FabricTransport, Topology

# A DGX Spark's CX-7 card has two ports: a full mesh without a switch has at most three nodes.
MESH_NODES = 3


def node_count(d: Deployment) -> Iterator[Diagnostic]:
    cluster = d.spec.cluster
    count, given = len(cluster.nodes), cluster.topology
    path = cluster.at("topology")
    if given is Topology.DIRECT and count > 2:
        yield error(
            path,
            f"direct means two nodes on one cable, but there are {count} nodes: write topology: switch when they "
            "share a switch, mesh for three cabled to each other, ring for each cabled to the next",
        )
    elif given is Topology.MESH and count != MESH_NODES:
        fix = "direct" if count == 2 else "ring (each node cabled to the next)"
        yield error(
            path,
            f"a mesh without a switch is three nodes, each cabled to the other two (a Spark has two CX-7 ports), "
            f"but there are {count}; write topology: {fix}" + ("" if count > 1 else ", or leave it out"),
        )
    elif given is Topology.RING and count < 3:
        yield error(path, f"a ring needs at least three nodes, there are {count}; two nodes on one cable are direct")


def switchless_control(d: Deployment) -> Iterator[Diagnostic]:
    """In a mesh or ring a CX-7 address reaches one neighbour only: the rendezvous, Ray's GCS, NCCL's
    bootstrap and the engine's host address need a network every node reaches."""
    if not switchless(d.topology):
        return
    for node in d.spec.cluster.nodes:
        if node.control is None:
            yield error(
                node.location,
                f"node {node.name} has no 'control': in a {d.topology} each cable reaches one neighbour, so the "
                "rendezvous and NCCL's bootstrap go over a network every node reaches; write "
                "control: {netdev: enP7s7, ip: <its 10 GbE address>}",
            )


def ring_order(d: Deployment) -> Iterator[Diagnostic]:
    """NCCL_ALGO=Ring needs each rank's neighbours cabled to it; vLLM's Ray executor orders the ranks
    head first, then by the workers' IP addresses, which need not be the cabling's order."""
    if d.topology is not Topology.RING or d.backend is not Backend.RAY:
        return
    engine = d.spec.engine
    path = engine.at("backend") if engine.is_given("backend") else d.spec.cluster.at("topology")
    yield error(
        path,
        "a ring cannot use the Ray backend: Ray orders the ranks by IP address, not round the cables, and "
        "NCCL's ring then connects nodes that are not cabled; write engine.backend: native (the ranks then "
        "follow cluster.nodes, which is the ring's order)",
    )


def switchless_rdma(d: Deployment) -> Iterator[Diagnostic]:
    if not switchless(d.topology) or not d.multi:
        return
    for node in d.spec.cluster.nodes:
        # Without transport: sockets, a node without RDMA devices is an error (rules.transport).
        if not node.fabric.hcas and node.fabric.transport is FabricTransport.SOCKETS:
            yield warning(
                node.fabric.at("hcas"),
                f"no RDMA devices on {node.name}: in a {d.topology} NCCL's sockets go over the control netdev, "
                "so all traffic takes the 10 GbE; list the CX-7 ports' RDMA devices (sparkc discover finds them)",
            )


# NCCL reads NCCL_IB_SUBNET_AWARE_ROUTING from this release on (NVIDIA/nccl, tagged 2026-06-04).
SUBNET_ROUTING_NCCL = "2.30.7"


def subnet_routing_nccl(d: Deployment) -> Iterator[Diagnostic]:
    """Over RDMA in a mesh or ring, NCCL picks each peer's device by subnet only from 2.30.7 on; an older one
    ignores the setting and opens connections on ports no cable joins to the peer."""
    if not switchless(d.topology) or not d.multi or not any(n.fabric.hcas for n in d.spec.cluster.nodes):
        return
    image, nccl = d.spec.container.image, d.nccl
    path = d.spec.container.at("image")
    need = f"NCCL {SUBNET_ROUTING_NCCL} or later"
    if nccl is None:
        yield warning(
            path,
            f"the NCCL release in {image} is not known to sparkc: a {d.topology} over RDMA needs {need} (the first "
            "to read NCCL_IB_SUBNET_AWARE_ROUTING); the launch's fabric probe reads it before the engine starts. "
            "Record it in the image's profile (nccl.release) to check it here",
        )
    elif nccl.below(SUBNET_ROUTING_NCCL):
        yield error(
            path,
            f"{image} ships NCCL {nccl}, which ignores NCCL_IB_SUBNET_AWARE_ROUTING (read from NCCL "
            f"{SUBNET_ROUTING_NCCL} on): in a {d.topology} NCCL would then open connections on ports no cable joins "
            f"to the peer. Use an image with {need}",
        )


def link_prefix(d: Deployment) -> Iterator[Diagnostic]:
    cluster = d.spec.cluster
    if cluster.is_given("link_prefix_length") and not switchless(d.topology):
        yield warning(
            cluster.at("link_prefix_length"),
            f"only a mesh or a ring routes by each cable's subnet; with topology {d.topology} this does nothing: "
            "remove it",
        )


def direct_subnet(d: Deployment) -> Iterator[Diagnostic]:
    """Two nodes on one cable have no router between them: each end reaches the other only on its own subnet
    (the /24 NVIDIA's playbooks and setup-fabric use)."""
    nodes = d.spec.cluster.nodes
    if d.topology is not Topology.DIRECT or len(nodes) != 2 or not all(n.cabled for n in nodes):
        return
    first, second = nodes
    nets = [_subnet(n.fabric.ip) for n in nodes]
    if None in nets or nets[0] == nets[1]:
        return
    yield warning(
        second.fabric.at("ip"),
        f"{second.name}'s {second.fabric.ip} and {first.name}'s {first.fabric.ip} are on different /{DIRECT_PREFIX} "
        "subnets, and a direct cable has no router between them: neither end reaches the other (NCCL and the "
        f"rendezvous fail) unless their prefix is shorter; put both on {nets[0]}"
        + ("" if d.spec.cluster.topology else " (or, where a switch routes between them, write topology: switch)"),
    )


# The subnet of a direct cable's two ends, as NVIDIA's playbooks and setup-fabric's default address them.
DIRECT_PREFIX = 24


def _subnet(text: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(f"{ipaddress.IPv4Address(text)}/{DIRECT_PREFIX}", strict=False)
    except ValueError:
        return None


RULES = (node_count, switchless_control, ring_order, switchless_rdma, subnet_routing_nccl, link_prefix, direct_subnet)
