"""`sparkc setup-fabric SPEC -o DIR`: a reviewed setup-fabric.sh that gives every fabric netdev of every
node (fabric.netdev, the twins, the other cable's port) its address and MTU 9000 (netplan, else
NetworkManager, else live only), replacing what other netplan files said about it, and the head's ssh key
on the workers; then checks that the head reaches every worker as the launcher will (BatchMode: the
worker's host key known on the head under the name the launcher uses).

Run by the operator from a machine that reaches every node by its management address (ssh may ask to
confirm a host key, or for a login password). On each node it needs root: a root login, or passwordless
`sudo -n`, checked on every node before anything changes. Idempotent; `--dry-run` changes nothing.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from compiler.diagnostics import Diagnostic, error
from compiler.output.library import single_quoted
from compiler.output.render import bash, environment
from compiler.resolve.build import ssh_options as launch_ssh_options
from compiler.resolve.env import FABRIC_PREFIX, switchless
from compiler.resolve.rules.cluster import next_subnet, port_of, roce_name, twin
from compiler.resources import data_dir
from compiler.spec.typed import Node, Spec, Topology

SCRIPT = "setup-fabric.sh"
FABRIC_MTU = 9000
DEFAULT_KEY = ""  # the node side reads it as ~/.ssh/id_ed25519 of the login user


@dataclass(frozen=True)
class FabricLink:
    netdev: str
    address: str  # ip/prefix
    why: str  # where the address comes from, for the script's reader


@dataclass(frozen=True)
class FabricNode:
    name: str
    target: str  # user@host, or "" to run on this machine (a node without an ssh address)
    links: tuple[FabricLink, ...]  # fabric.netdev first

    @property
    def words(self) -> str:
        """NETDEV ADDRESS/PREFIX ..., what the node script takes (names and IPv4 addresses: no spaces)."""
        return " ".join(f"{link.netdev} {link.address}" for link in self.links)


@dataclass(frozen=True)
class FabricPlan:
    spec_path: str
    spec_sha256: str
    head: str
    nodes: tuple[FabricNode, ...]  # head first
    ssh_options: tuple[str, ...]
    launch_ssh_options: tuple[str, ...]  # what launch-cluster.sh and distribute.sh pass ssh (BatchMode)
    head_key: str  # private key path on the head; its .pub goes to the workers
    prefix: int
    mtu: int = FABRIC_MTU


def fabric_plan(
    spec: Spec, topology: Topology, head: str, spec_path: str, spec_sha256: str, prefix_option: int | None
) -> tuple[FabricPlan | None, list[Diagnostic]]:
    """The plan, or why the spec does not say every fabric netdev's address (each problem, at its place)."""
    ssh = spec.cluster.ssh
    problems: list[Diagnostic] = []
    prefix = prefix_option or FABRIC_PREFIX
    if switchless(topology):
        prefix = spec.cluster.link_prefix_length
        if prefix_option is not None and prefix_option != prefix:
            where = "link_prefix_length" if spec.cluster.is_given("link_prefix_length") else "topology"
            problems.append(
                error(
                    spec.cluster.at(where),
                    f"--prefix-length {prefix_option} differs from cluster.link_prefix_length {prefix}: in a "
                    f"{topology} each cable's subnet is the spec's (NCCL_IB_SUBNET_PREFIX_LEN follows it); leave "
                    f"--prefix-length out, or write link_prefix_length: {prefix_option}",
                )
            )
    used = _spec_addresses(spec)
    nodes = []
    for node in sorted(spec.cluster.nodes, key=lambda n: n.name != head):
        if not node.cabled:
            continue  # one node alone: no fabric to set up
        links, found = _links(node, topology, prefix, used)
        problems += found
        target = (f"{ssh.user}@{node.ssh}" if ssh.user else node.ssh) if node.ssh else ""
        nodes.append(FabricNode(node.name, target, links))
    if problems:
        return None, problems
    options = ["-o", f"ConnectTimeout={ssh.connect_timeout}", "-p", str(ssh.port)]
    for option in ssh.options:
        options += ["-o", option]
    launch = tuple(word for group in launch_ssh_options(ssh) for word in group)
    plan = FabricPlan(
        spec_path, spec_sha256, head, tuple(nodes), tuple(options), launch, ssh.identity_file or DEFAULT_KEY, prefix
    )
    return plan, []


def _spec_addresses(spec: Spec) -> set[str]:
    used = set()
    for node in spec.cluster.nodes:
        used |= {node.fabric.ip, *node.fabric.addresses.values(), *([node.ssh] if node.ssh else [])}
        if node.control:
            used.add(node.control.ip)
    return used


def _links(
    node: Node, topology: Topology, prefix: int, used: set[str]
) -> tuple[tuple[FabricLink, ...], list[Diagnostic]]:
    """Every fabric netdev of a node with its address: fabric.netdev, fabric.addresses, the other netdevs,
    and the twins whose RDMA devices hcas lists (each needs an IPv4 GID, so an address)."""
    fabric = node.fabric
    links = [FabricLink(fabric.netdev, f"{fabric.ip}/{prefix}", "fabric.ip")]
    links += [FabricLink(n, f"{ip}/{prefix}", "fabric.addresses") for n, ip in fabric.addresses.items()]
    problems = []
    listed = {h.lstrip("=").split(":")[0] for h in fabric.hcas}
    wanted = [n for n in fabric.netdevs if n != fabric.netdev]
    wanted += [t for n in (fabric.netdev, *fabric.netdevs) if (t := twin(n)) and roce_name(t) in listed]
    for netdev in dict.fromkeys(wanted):
        if any(link.netdev == netdev for link in links):
            continue
        twin_of = fabric.netdev if port_of(netdev) == port_of(fabric.netdev) and netdev != fabric.netdev else ""
        guess = _nvidia_twin_address(fabric.ip, used) if twin_of else None
        if guess and not switchless(topology) and prefix == FABRIC_PREFIX:
            links.append(FabricLink(netdev, f"{guess}/{prefix}", f"the next /24 of {fabric.ip}, NVIDIA's twin"))
            continue
        why = (
            f"{netdev} (RDMA device {roce_name(netdev)} in hcas) has no address"
            if netdev not in fabric.netdevs
            else f"{netdev} (in fabric.netdevs) has no address"
        )
        reason = _why_no_guess(topology, prefix, twin_of)
        problems.append(
            error(
                fabric.at("addresses") if fabric.is_given("addresses") else fabric.location,
                f"{node.name}: {why}{reason}; write fabric.addresses: {{{netdev}: IP}}, on a subnet none of the "
                "node's other fabric addresses is on, and on the same subnet as the port at the cable's other end",
            )
        )
    seen: dict[ipaddress.IPv4Network, str] = {}
    for link in links:
        try:
            subnet = ipaddress.IPv4Interface(link.address).network
        except ValueError:
            continue  # an IPv6 fabric.ip: its own family, no subnet to share with the twins'
        if subnet in seen:
            problems.append(
                error(
                    fabric.at("addresses", link.netdev),
                    f"{node.name}: {link.netdev} and {seen[subnet]} would both be on {subnet} (prefix /{prefix}): "
                    "each fabric netdev needs a subnet of its own; choose another address or a longer --prefix-length",
                )
            )
        seen.setdefault(subnet, link.netdev)
    return tuple(links), problems


def _nvidia_twin_address(ip: str, spec_addresses: set[str]) -> str | None:
    """NVIDIA's two-Spark rule: the twin has the same host part on the next /24 (.100.10 -> .101.10), where
    that /24 holds no address the spec gives (None: there is no next /24 in the same /16, or it is taken)."""
    try:
        address = ipaddress.IPv4Address(ip)
    except ValueError:
        return None
    if int(address) >> 8 & 0xFF == 0xFF:
        return None
    guess = ipaddress.IPv4Address(next_subnet(address))
    subnet = ipaddress.IPv4Network(f"{guess}/{FABRIC_PREFIX}", strict=False)
    return None if any(_within(a, subnet) for a in spec_addresses) else str(guess)


def _within(text: str, subnet: ipaddress.IPv4Network) -> bool:
    try:
        return ipaddress.ip_address(text) in subnet
    except ValueError:
        return False


def _why_no_guess(topology: Topology, prefix: int, twin_of: str) -> str:
    if switchless(topology):
        return f" (in a {topology} sparkc cannot choose it: each cable's two ends share a subnet of their own)"
    if not twin_of:
        return ""
    if prefix != FABRIC_PREFIX:
        return f" (NVIDIA's next-/24 rule needs prefix {FABRIC_PREFIX}, this is /{prefix})"
    return " (NVIDIA's rule, the same host part on the next /24, gives no address whose subnet is free here)"


def _sh_quote_function() -> str:
    """sh_quote from the launch scripts' common.sh: one quoting function for every script sparkc writes."""
    found = re.search(r"^sh_quote\(\) \{\n.*?^\}\n", bash("common.sh"), re.M | re.S)
    assert found, "runtime/common.sh defines sh_quote"
    return found.group(0)


def render_setup(plan: FabricPlan) -> str:
    node_script = (data_dir("templates") / "setup" / "fabric-node.sh").read_text(encoding="utf-8")
    assert "\nSPARKC_NODE_SCRIPT\n" not in node_script
    snippets = {
        f"{name}_sh": single_quoted((data_dir("templates") / "setup" / f"{file}.sh").read_text(encoding="utf-8"))
        for name, file in (("key", "head-key"), ("authorize", "authorize-key"))
    }
    template = environment().get_template("setup/setup-fabric.sh.j2")
    return template.render(plan=plan, sh_quote=_sh_quote_function(), node_script=node_script, **snippets)
