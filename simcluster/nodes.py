"""Names and addresses of simulated nodes."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .net import MGMT_IF

DEFAULT_NAME = "sparkc-sim"
WORK_ROOT = Path(os.environ.get("SPARKC_SIM_WORK", "/var/lib/sparkc-sim"))
DEFAULT_FABRIC_NETDEV = "enp1s0f1np1"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,23}$")  # no "_": namespace names are "<cluster>_<node>"
_IFNAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")


class ClusterUnavailable(RuntimeError):
    """This machine cannot host a simulated cluster (not root, a tool missing, ...)."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    fabric_netdev: str = DEFAULT_FABRIC_NETDEV


@dataclass(frozen=True)
class Node:
    name: str
    index: int
    mgmt_ip: str
    fabric_ip: str
    fabric_netdev: str
    netns: str
    dir: Path

    @property
    def docker_host(self) -> str:
        # The node's socket is visible from the root namespace through its /run directory.
        return f"unix://{self.dir}/run/docker.sock"


def validate_specs(specs: Sequence[NodeSpec]) -> None:
    if not specs:
        raise ValueError("a cluster needs at least one node")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"node names must be unique: {names}")
    for s in specs:
        if not NAME_RE.match(s.name):
            raise ValueError(f"node name {s.name!r} must match {NAME_RE.pattern}")
        if s.name == "net":
            raise ValueError("node name 'net' is reserved (the bridges' namespace is <cluster>_net)")
        if not _IFNAME_RE.match(s.fabric_netdev) or s.fabric_netdev in ("lo", MGMT_IF):
            raise ValueError(f"bad fabric netdev name {s.fabric_netdev!r} for node {s.name}")
    if len(specs) > 200:
        raise ValueError("at most 200 nodes")  # addresses are .11 to .210 of a /24
