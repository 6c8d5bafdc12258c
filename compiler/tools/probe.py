"""What one node's probe (templates/discover/probe.sh) printed, as facts; each missing piece becomes a warning.

The probe prints one fact per line, `KIND VALUE...`; lines this parser does not know are ignored, so
a newer probe or a noisy login shell (a motd printed to stdout) does not break it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from compiler.user_files import ascii_int

FABRIC_MTU = 9000
_IBDEV2NETDEV = re.compile(r"^(\S+) port (\d+) ==> (\S+)")
_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$", re.IGNORECASE)


@dataclass
class Netdev:
    """A netdev with an RDMA device behind it (a ConnectX-7 port function on a Spark)."""

    name: str
    hcas: list[str] = field(default_factory=list)
    mtu: int | None = None
    state: str = "?"
    ipv4: list[str] = field(default_factory=list)  # address/prefix
    gids: dict[str, list[int]] = field(default_factory=dict)  # hca -> RoCE v2 IPv4-mapped GID indexes

    @property
    def up(self) -> bool:
        return self.state == "up"

    @property
    def networks(self) -> list[ipaddress.IPv4Network]:
        return [ipaddress.IPv4Interface(a).network for a in self.ipv4]


@dataclass
class NodeFacts:
    host: str  # the management address sparkc reached it by
    hostname: str = ""
    os: dict[str, str] = field(default_factory=dict)  # ID, ID_LIKE, VERSION_ID of /etc/os-release
    tools: set[str] = field(default_factory=set)
    netdevs: list[Netdev] = field(default_factory=list)  # CX-7 only, in name order
    gpus: list[str] | None = None  # None: unknown (no nvidia-smi, or it failed)
    warnings: list[str] = field(default_factory=list)

    def netdev(self, name: str) -> Netdev | None:
        return next((n for n in self.netdevs if n.name == name), None)


class _Lines:
    """The probe's lines, sorted by kind (one method per kind it knows)."""

    def __init__(self, facts: NodeFacts) -> None:
        self.facts = facts
        self.rdma: dict[str, list[str]] = {}  # netdev -> hcas
        self.links: dict[str, tuple[int | None, str]] = {}
        self.addresses: dict[str, list[str]] = {}
        self.gids: dict[str, list[tuple[int, str]]] = {}  # hca -> (index, IPv4) of RoCE v2 IPv4-mapped GIDs
        self.gpus: list[str] = []
        self.gpu_error = ""
        self.complete = False

    def hostname(self, rest: str, words: list[str]) -> None:
        self.facts.hostname = rest.strip()

    def os(self, rest: str, words: list[str]) -> None:
        key, _, value = rest.partition("=")
        if value:
            self.facts.os[key] = value.strip().strip('"')

    def tool(self, rest: str, words: list[str]) -> None:
        self.facts.tools.update(words[:1])

    def rdma_(self, rest: str, words: list[str]) -> None:
        if len(words) == 2:
            self.rdma.setdefault(words[1], []).append(words[0])

    def ibdev2netdev(self, rest: str, words: list[str]) -> None:
        found = _IBDEV2NETDEV.match(rest)
        if found:
            self.rdma.setdefault(found.group(3), []).append(found.group(1))

    def gid(self, rest: str, words: list[str]) -> None:
        index = ascii_int(words[1], 5) if len(words) >= 3 else None  # a node may answer anything, `²` too
        ip = _mapped_ipv4(words[2]) if index is not None else None
        if index is not None and ip and " ".join(words[3:]) == "RoCE v2":
            self.gids.setdefault(words[0], []).append((index, ip))

    def netdev(self, rest: str, words: list[str]) -> None:
        if len(words) == 3:
            self.links[words[0]] = (ascii_int(words[1], 7), words[2])

    def inet(self, rest: str, words: list[str]) -> None:
        if len(words) == 2 and _is_interface(words[1]):
            self.addresses.setdefault(words[0], []).append(words[1])

    def gpu(self, rest: str, words: list[str]) -> None:
        if rest.strip():
            self.gpus.append(rest.strip())

    def gpu_error_(self, rest: str, words: list[str]) -> None:
        self.gpu_error = rest.strip() or "no message"

    def end(self, rest: str, words: list[str]) -> None:
        self.complete = True


# What each kind of line is read by; any other line (a motd, a newer probe's kind) is ignored.
_KINDS = {
    **{k: k for k in ("hostname", "os", "tool", "ibdev2netdev", "gid", "netdev", "inet", "gpu", "end")},
    "rdma": "rdma_",
    "gpu-error": "gpu_error_",
}


def parse(host: str, output: str) -> NodeFacts:
    facts = NodeFacts(host)
    lines = _Lines(facts)
    for line in output.splitlines():
        kind, _, rest = line.strip().partition(" ")
        if kind in _KINDS:
            getattr(lines, _KINDS[kind])(rest, rest.split())
    if not lines.complete:
        facts.warnings.append("the probe's output ended early; what follows may be incomplete")
    for name in sorted(lines.rdma):
        mtu, state = lines.links.get(name, (None, "?"))
        netdev = Netdev(name, sorted(set(lines.rdma[name])), mtu, state, lines.addresses.get(name, []))
        mine = {str(ipaddress.IPv4Interface(a).ip) for a in netdev.ipv4}
        netdev.gids = {h: sorted(i for i, ip in lines.gids.get(h, []) if ip in mine) for h in netdev.hcas}
        facts.netdevs.append(netdev)
    _gpus(facts, lines.gpus, lines.gpu_error)
    facts.warnings += node_warnings(facts)
    return facts


def _gpus(facts: NodeFacts, gpus: list[str], gpu_error: str) -> None:
    if gpus:
        facts.gpus = gpus
    elif gpu_error:
        facts.warnings.append(f"nvidia-smi failed ({gpu_error}); GPU count unknown (is the driver loaded?)")
    elif "nvidia-smi" in facts.tools:
        facts.gpus = []
        facts.warnings.append("nvidia-smi lists no GPU")
    else:
        facts.warnings.append("no nvidia-smi on this node; GPU count unknown")


def _mapped_ipv4(gid: str) -> str | None:
    found = _MAPPED.match(gid)
    if not found:
        return None
    return str(ipaddress.IPv4Address(int(found.group(1) + found.group(2), 16)))


def _is_interface(text: str) -> bool:
    try:
        ipaddress.IPv4Interface(text)
    except ValueError:
        return False
    return "/" in text


def node_warnings(facts: NodeFacts) -> list[str]:
    """What looks wrong on one node, whatever netdev the cluster ends up using."""
    if not facts.netdevs:
        return [
            "no netdev with an RDMA device behind it (/sys/class/infiniband is empty and ibdev2netdev found none): "
            "are the ConnectX-7 drivers (mlx5_core, mlx5_ib) loaded?"
        ]
    found = []
    down = [n.name for n in facts.netdevs if n.state not in ("up", "?")]
    if down:
        found.append(f"down (not cabled?): {', '.join(down)}")
    unknown = [n.name for n in facts.netdevs if n.state == "?"]
    if unknown:
        found.append(f"link state unknown: {', '.join(unknown)}")
    for n in facts.netdevs:
        if n.up and n.mtu is not None and n.mtu < FABRIC_MTU:
            found.append(f"{n.name} has MTU {n.mtu}; the fabric wants {FABRIC_MTU} (a firmware reboot can reset it)")
        if n.up and not n.ipv4:
            found.append(f"{n.name} is up but has no IPv4 address")
        if n.ipv4 and not any(n.gids.values()):
            found.append(f"{n.name} ({', '.join(n.hcas)}) has no RoCE v2 IPv4 GID: NCCL cannot use RDMA on it")
    return found + _shared_subnets(facts)


def _shared_subnets(facts: NodeFacts) -> list[str]:
    found = []
    seen: dict[ipaddress.IPv4Network, str] = {}
    for n in facts.netdevs:
        for network in n.networks:
            if network in seen and seen[network] != n.name:
                found.append(
                    f"{seen[network]} and {n.name} are both on {network}: twins of a port must be on different "
                    "subnets (e.g. 192.168.100.0/24 and 192.168.101.0/24)"
                )
            seen.setdefault(network, n.name)
    return found
