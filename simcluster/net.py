"""Network namespaces and the networks between the nodes: a bridged management network, and the fabric
either bridged too (a switch) or as cables between neighbours (a mesh or ring without a switch: each
link its own veth pair and subnet, reaching only the node at its other end, as a CX-7 cable does).

Everything is created inside namespaces: the root namespace never gets an address or a route on
these networks, so no test traffic can leave the machine through its default route.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

MGMT_IF = "mgmt0"
MGMT_BRIDGE = "br-mgmt"
FABRIC_BRIDGE = "br-fabric"
FABRIC_MTU = 9000  # the ConnectX-7 fabric runs jumbo frames; keep the same here


@dataclass(frozen=True)
class Attachment:
    """One node's two links: its namespace, addresses and the fabric netdev name it sees."""

    netns: str
    index: int
    mgmt_ip: str
    fabric_ip: str
    fabric_netdev: str
    prefix_len: int = 24
    bridged_fabric: bool = True  # False: the fabric is the node's cables (Link), no port on a bridge


@dataclass(frozen=True)
class Link:
    """One cable between two nodes' CX-7 ports: a veth pair, one end in each node's namespace."""

    a_netns: str
    a_netdev: str
    a_ip: str
    b_netns: str
    b_netdev: str
    b_ip: str
    prefix_len: int


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {res.stderr.strip()}")
    return res


def list_netns() -> list[str]:
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def create(bridge_ns: str, nodes: Sequence[Attachment], links: Sequence[Link] = ()) -> None:
    ip("netns", "add", bridge_ns)
    ip("-n", bridge_ns, "link", "add", MGMT_BRIDGE, "type", "bridge")
    ip("-n", bridge_ns, "link", "add", FABRIC_BRIDGE, "mtu", str(FABRIC_MTU), "type", "bridge")
    for br in (MGMT_BRIDGE, FABRIC_BRIDGE):
        ip("-n", bridge_ns, "link", "set", br, "up")
    for node in nodes:
        _attach(bridge_ns, node)
    for link in links:
        _cable(link)


def _cable(link: Link) -> None:
    # Made inside one node's namespace with the peer placed straight into the other's: no name of it
    # ever exists in the root namespace, and nothing forwards between two cables.
    mtu = str(FABRIC_MTU)
    ip(
        "-n",
        link.a_netns,
        "link",
        "add",
        link.a_netdev,
        "mtu",
        mtu,
        "type",
        "veth",
        "peer",
        "name",
        link.b_netdev,
        "mtu",
        mtu,
        "netns",
        link.b_netns,
    )
    for netns, netdev, address in ((link.a_netns, link.a_netdev, link.a_ip), (link.b_netns, link.b_netdev, link.b_ip)):
        ip("-n", netns, "addr", "add", f"{address}/{link.prefix_len}", "dev", netdev)
        ip("-n", netns, "link", "set", netdev, "up")


def _attach(bridge_ns: str, node: Attachment) -> None:
    ns = node.netns
    ip("netns", "add", ns)
    ip("-n", ns, "link", "set", "lo", "up")
    # Each veth is created inside the node's namespace with its peer placed straight into the
    # bridge namespace, so names like mgmt0 never exist in the root namespace, even for a moment.
    mgmt_peer, fabric_peer = f"m{node.index}", f"f{node.index}"
    ip("-n", ns, "link", "add", MGMT_IF, "type", "veth", "peer", "name", mgmt_peer, "netns", bridge_ns)
    ip("-n", bridge_ns, "link", "set", mgmt_peer, "master", MGMT_BRIDGE, "up")
    ip("-n", ns, "addr", "add", f"{node.mgmt_ip}/{node.prefix_len}", "dev", MGMT_IF)
    ip("-n", ns, "link", "set", MGMT_IF, "up")
    if not node.bridged_fabric:
        return
    ip(
        "-n",
        ns,
        "link",
        "add",
        node.fabric_netdev,
        "mtu",
        str(FABRIC_MTU),
        "type",
        "veth",
        "peer",
        "name",
        fabric_peer,
        "mtu",
        str(FABRIC_MTU),
        "netns",
        bridge_ns,
    )
    ip("-n", bridge_ns, "link", "set", fabric_peer, "master", FABRIC_BRIDGE, "up")
    ip("-n", ns, "addr", "add", f"{node.fabric_ip}/{node.prefix_len}", "dev", node.fabric_netdev)
    ip("-n", ns, "link", "set", node.fabric_netdev, "up")


def set_link(netns: str, ifname: str, up: bool) -> None:
    ip("-n", netns, "link", "set", ifname, "up" if up else "down")


def netns_pids(netns: str) -> list[int]:
    out = ip("netns", "pids", netns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_netns_processes(netns: str, timeout: float = 10.0) -> None:
    """SIGKILL everything in the namespace and wait until it is gone (a dead node's leftovers)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in netns_pids(netns) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} in netns {netns} did not die")
        time.sleep(0.1)


def delete(netns: str) -> None:
    ip("netns", "delete", netns, check=False)
