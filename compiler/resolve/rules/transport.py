"""Rules about how NCCL crosses the fabric: through the RDMA devices each node lists, or over sockets because the
spec says so, and the same way on every node. A fallback to sockets is about 100x slower and NCCL does not fail
on it, so several nodes without RDMA devices are refused unless the spec asks for sockets. They only report."""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.resolve.context import Deployment
from compiler.resolve.rules.cluster import PLACEHOLDERS, roce_name, twin
from compiler.spec.typed import FabricTransport, Node

SOCKETS = FabricTransport.SOCKETS


def rdma_devices(d: Deployment) -> Iterator[Diagnostic]:
    for node in d.spec.cluster.nodes:
        if node.cabled:
            yield from _node_rdma(node)


def one_transport(d: Deployment) -> Iterator[Diagnostic]:
    """Several nodes: every one lists its RDMA devices, or every one says sockets."""
    nodes = d.spec.cluster.nodes
    if not d.multi:
        return
    listing = [n.name for n in nodes if n.fabric.hcas]
    on_sockets = [n.name for n in nodes if n.fabric.transport is SOCKETS]
    for node in nodes:
        if node.fabric.transport is SOCKETS:
            if listing and not node.fabric.hcas:
                yield error(
                    node.fabric.at("transport"),
                    f"{node.name} uses sockets while {', '.join(listing)} {'lists' if len(listing) == 1 else 'list'} "
                    "RDMA devices: NCCL must use one "
                    "transport on every rank (a mix hangs or falls back to sockets everywhere); list this node's "
                    "RDMA devices in hcas instead, or make every node's transport sockets",
                )
        elif not node.fabric.hcas:  # at the node's `fabric:`, where hcas or transport goes
            yield Diagnostic(node.fabric.location, _no_rdma(node, listing, on_sockets), at_key=True)


def sockets_without_hcas(d: Deployment) -> Iterator[Diagnostic]:
    for node in d.spec.cluster.nodes:
        if node.fabric.transport is SOCKETS and node.fabric.hcas:
            yield error(
                node.fabric.at("transport"),
                f"transport sockets turns RDMA off (NCCL_IB_DISABLE=1), but hcas lists {', '.join(node.fabric.hcas)}: "
                "remove transport to use them, or remove hcas to use sockets",
            )


def _no_rdma(node: Node, listing: list[str], on_sockets: list[str]) -> str:
    first, second = roce_name(node.fabric.netdev), roce_name(twin(node.fabric.netdev))
    example = ", ".join(n for n in (first, second) if n) or "rocep1s0f1, roceP2p1s0f1"
    if listing:
        verb = "lists" if len(listing) == 1 else "list"
        why = f" while {', '.join(listing)} {verb} some: NCCL must use one transport on every rank"
    elif on_sockets:
        verb = "says" if len(on_sockets) == 1 else "say"
        why = f" while {', '.join(on_sockets)} {verb} transport: sockets: NCCL must use one transport on every rank"
    else:
        why = ": NCCL would cross the fabric over TCP sockets, about 100x slower than RoCE, and nothing would say so"
    return (
        f"{node.name} lists no RDMA devices (fabric.hcas){why}; list its CX-7 port's devices, e.g. "
        f"hcas: [{example}] (sparkc discover, or ibdev2netdev on the node, shows them), or write "
        "transport: sockets on every node to use sockets on purpose"
    )


def _node_rdma(node: Node) -> Iterator[Diagnostic]:
    hcas = node.fabric.hcas
    if any(p in h for h in hcas for p in PLACEHOLDERS):
        return  # to be replaced: no_placeholders says so
    if len(hcas) == 1:
        yield warning(
            node.fabric.at("hcas"),
            "only one RDMA device: a CX-7 port shows up as two twins; with one NCCL gets about half the "
            "bandwidth (list both, e.g. rocep1s0f1 and roceP2p1s0f1)",
        )
    expected = roce_name(node.fabric.netdev)
    names = [h.lstrip("=") for h in hcas]
    if (
        names
        and expected
        and all(h.startswith("roce") for h in names)
        and expected not in [h.split(":")[0] for h in names]
    ):
        yield warning(
            node.fabric.at("hcas"),
            f"netdev {node.fabric.netdev} belongs to RDMA device {expected}, which is not listed "
            "(check with ibdev2netdev)",
        )


RULES = (rdma_devices, one_transport, sockets_without_hcas)
