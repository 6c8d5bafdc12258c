"""The routes distribute.sh copies along: for each worker, the node it receives from and that node's ways to it.

A copy takes the cables. Two addresses share a cable (or, in a switched fabric, the switch) when they lie in one
subnet of the fabric's prefix: each cable's own in a mesh or ring, the usual /24 elsewhere. From the head, every
node is reached by the fewest hops, so a mesh feeds each worker over its own cable and a ring passes the copy on
from neighbour to neighbour; where twins are addressed, each route lists both, and the copy's streams share them.
Only a node that no cable path reaches is fed over the control network, and the route says so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.plan import CopyRoute

# IPv6 fabrics route by the usual /64 whatever the IPv4 prefix is.
_V6_PREFIX = 64


@dataclass(frozen=True)
class CopyNode:
    """What a route needs of one node: its name, its fabric addresses (first the main one) and the control
    address it falls back to."""

    name: str
    addresses: tuple[str, ...]
    control: str


def _subnet(address: str, prefix: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    ip = ipaddress.ip_address(address)
    return ipaddress.ip_network(f"{ip}/{prefix if ip.version == 4 else _V6_PREFIX}", strict=False)


def reachable(sender: CopyNode, receiver: CopyNode, prefix: int) -> tuple[str, ...]:
    """The receiver's addresses that one of the sender's shares a subnet with, in the receiver's order."""
    nets = {_subnet(a, prefix) for a in sender.addresses}
    return tuple(a for a in receiver.addresses if _subnet(a, prefix) in nets)


def copy_routes(nodes: Sequence[CopyNode], prefix: int, user: str | None) -> tuple[CopyRoute, ...]:
    """Each worker's route, head (nodes[0]) first, breadth first: a node receives from the first node nearer
    the head (in spec order) that a cable joins it to."""
    routes: dict[str, CopyRoute] = {}
    reached = [nodes[0]]
    for sender in reached:  # grows while it is walked: breadth first
        for node in nodes[1:]:
            if node.name in routes:
                continue
            ways = reachable(sender, node, prefix)
            if ways:
                routes[node.name] = CopyRoute(node.name, sender.name, tuple(_target(a, user) for a in ways), True)
                reached.append(node)
    for node in nodes[1:]:
        if node.name not in routes:
            routes[node.name] = CopyRoute(node.name, nodes[0].name, (_target(node.control, user),), False)
    return tuple(routes[n.name] for n in nodes[1:])


def _target(address: str, user: str | None) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{user}@{host}" if user else host
