"""Rules about the cluster: values, nodes, addresses, RDMA devices, the TP x PP x DP layout. They only report."""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Iterator
from typing import Any

from compiler.diagnostics import Diagnostic, Path, error, warning
from compiler.resolve.context import Deployment
from compiler.resolve.env import fabric_prefix, switchless
from compiler.spec.typed import Architecture, Node

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# C1 controls and Unicode line breaks: some terminals and shells treat them as control or newline.
LINE_BREAKS = re.compile("[\x80-\x9f\u2028\u2029]")


# An interface name or index, as the schema's ifname: what an IPv6 scope id (fe80::1%enp1s0f1np1) may be.
SCOPE_ID = re.compile(r"[A-Za-z0-9_.-]{1,15}")

# Longer values would not fit one word of a command line (Linux takes at most 128 KiB) and no real
# path, name or flag comes near this.
MAX_VALUE_BYTES = 4096


def plain_values(d: Deployment) -> Iterator[Diagnostic]:
    """Every value the user wrote ends up in a script, a label or a log line: no control characters,
    no line separators, and a size a command line takes. Names (env, ulimits) too: the schema's patterns
    end in `$`, which in Python also matches before a final newline."""
    for path, text, is_name in _given_strings(d.spec.given, ()):
        what = "names" if is_name else "values"
        if CONTROL.search(text):
            yield Diagnostic(path, f"control characters (newline, tab, ...) are not allowed in {what}", at_key=is_name)
        elif LINE_BREAKS.search(text):
            yield Diagnostic(
                path, f"line or paragraph separators (U+0085, U+2028, U+2029) are not allowed in {what}", at_key=is_name
            )
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_VALUE_BYTES:
            yield error(path, f"this value is {size} bytes long; at most {MAX_VALUE_BYTES} fit a command line safely")


# What `sparkc init` (CHANGE-ME) and `sparkc import` (PLACEHOLDER) write where only the operator knows the value.
PLACEHOLDERS = ("CHANGE-ME", "PLACEHOLDER")
PLACEHOLDER_WHY = "which sparkc init or import wrote for a value only you know"


def is_placeholder_left(diagnostic: Diagnostic) -> bool:
    """The diagnostic says a placeholder is still there (what init and import expect of their own output)."""
    return PLACEHOLDER_WHY in diagnostic.message


def no_placeholders(d: Deployment) -> Iterator[Diagnostic]:
    """A value still marked for replacement would reach the nodes as a path or host nobody has."""
    for path, text, is_name in _given_strings(d.spec.given, ()):
        found = next((p for p in PLACEHOLDERS if p in text), None)
        if found and not is_name:
            fix = HCAS_FIX if "hcas" in path else "write this deployment's real value"
            yield error(path, f"'{text}' still holds {found}, {PLACEHOLDER_WHY}: {fix}")


# What a placeholder in fabric.hcas stands for, and the other choice.
HCAS_FIX = (
    "write the RDMA devices of this node's cabled CX-7 port, e.g. [rocep1s0f1, roceP2p1s0f1] (sparkc discover, "
    "or ibdev2netdev on the node, lists them); or remove hcas and write transport: sockets on every node for "
    "NCCL over TCP, about 100x slower"
)


def bad_scope(text: str) -> str | None:
    """Why the scope id of an IPv6 address is refused: ipaddress takes any text after '%' (spaces, quotes,
    `$(...)`, ';'), and the address reaches env values, --master-addr, ssh targets and netplan YAML."""
    _, percent, scope = text.partition("%")
    if not percent or SCOPE_ID.fullmatch(scope.split("/")[0]):
        return None
    return (
        f"'{text}': the scope id after '%' must be an interface name or number (letters, digits, '_', '.', '-', "
        "at most 15), such as fe80::1%enp1s0f1np1"
    )


def _given_strings(value: Any, path: Path) -> Iterator[tuple[Path, str, bool]]:
    """(path, text, whether it is a mapping's key) for every string the user wrote."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key), str(key), True
            yield from _given_strings(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _given_strings(item, (*path, i))


def head_exists(d: Deployment) -> Iterator[Diagnostic]:
    wanted = d.spec.cluster.head
    names = [n.name for n in d.spec.cluster.nodes]
    if wanted is None or wanted in names:
        return
    hint = difflib.get_close_matches(wanted, names, n=1)
    yield error(
        ("cluster", "head"),
        f"no node is named '{wanted}'" + (f"; did you mean '{hint[0]}'?" if hint else f"; nodes: {', '.join(names)}"),
    )


def unique_nodes(d: Deployment) -> Iterator[Diagnostic]:
    for what in ("name", "ssh", "fabric IP"):
        seen: dict[str, int] = {}
        for node in d.spec.cluster.nodes:
            value = {"name": node.name, "ssh": node.ssh, "fabric IP": node.fabric.ip}[what]
            if value is None:
                continue
            if value in seen:
                path = node.fabric.at("ip") if what == "fabric IP" else node.at(what)
                yield error(
                    path, f"'{value}' is already used by node {seen[value] + 1}; every node needs its own {what}"
                )
            else:
                seen[value] = node.index


def fabric_addresses(d: Deployment) -> Iterator[Diagnostic]:
    for node in d.spec.cluster.nodes:
        path = node.fabric.at("ip")
        address = _address(
            node.fabric.ip,
            "fabric",
            "the fabric side needs the CX-7 port's address (e.g. 192.168.100.10), not a host name",
        )
        if isinstance(address, str):
            yield error(path, address)
            continue
        if address.is_unspecified or address.is_multicast:
            yield error(path, f"{address} cannot be a node's address")
        elif address.is_loopback and d.multi:
            yield warning(path, f"{address} is a loopback address: only nodes on one machine can reach it")


def control_planes(d: Deployment) -> Iterator[Diagnostic]:
    """A control plane is given on every node or on none: the head's control IP is every node's
    rendezvous, which a node without one would look for on its fabric."""
    nodes = d.spec.cluster.nodes
    with_control = [n for n in nodes if n.control]
    # In a mesh or ring every node needs one, which the topology's rule says node by node.
    if with_control and len(with_control) < len(nodes) and not switchless(d.topology):
        for node in nodes:
            if node.control is None:
                yield error(
                    node.location,
                    f"node {node.name} has no 'control' while {with_control[0].name} has one: give every node "
                    "its control netdev and IP, or none",
                )
    seen: dict[str, str] = {}
    for node in with_control:
        assert node.control is not None
        path = node.control.at("ip")
        address = _address(node.control.ip, "control", f"write the address {node.control.netdev} has")
        if isinstance(address, str):
            yield error(path, address)
            continue
        if address.is_unspecified or address.is_multicast or (address.is_loopback and d.multi):
            yield error(path, f"{address} cannot be a node's control address: the other nodes must reach it")
        elif node.control.ip in seen:
            yield error(path, f"'{node.control.ip}' is already the control IP of {seen[node.control.ip]}")
        else:
            seen[node.control.ip] = node.name
        if node.control.ip == node.fabric.ip and node.control.netdev != node.fabric.netdev:
            yield error(
                path,
                f"{node.control.ip} is also the fabric IP, on {node.fabric.netdev}; an address sits on one "
                f"interface: write {node.control.netdev}'s own address",
            )


def port_of(netdev: str) -> str:
    """The CX-7 port a netdev belongs to, named by its first twin: enP2p1s0f1np1 -> enp1s0f1np1."""
    return re.sub(r"^enP\d+p", "enp", netdev)


def twin(netdev: str) -> str:
    """The other PCIe function of a CX-7 port, as a Spark names it: enp1s0f1np1 <-> enP2p1s0f1np1 ("" for
    names of another shape)."""
    if re.fullmatch(r"enp\d+s\d+f\d+np\d+", netdev):
        return "enP2" + netdev[2:]
    if re.fullmatch(r"enP\d+p\d+s\d+f\d+np\d+", netdev):
        return port_of(netdev)
    return ""


def fabric_map(d: Deployment) -> Iterator[Diagnostic]:
    """fabric.addresses: an IPv4 address for each other fabric netdev of the node (a twin, the other cable),
    used once in the cluster, and no two addresses of one node on one subnet (a netdev per subnet, or the
    kernel routes a twin's traffic out of the other and RoCE's GIDs no longer match)."""
    taken: dict[str, str] = {}
    for node in d.spec.cluster.nodes:
        taken.setdefault(node.fabric.ip, f"the fabric IP of {node.name}")
        if node.control:
            taken.setdefault(node.control.ip, f"the control IP of {node.name}")
    for node in d.spec.cluster.nodes:
        yield from _node_addresses(node, fabric_prefix(d), taken)


def _node_addresses(node: Node, prefix: int, taken: dict[str, str]) -> Iterator[Diagnostic]:
    fabric = node.fabric
    ports = {port_of(n) for n in (fabric.netdev, *fabric.netdevs)}
    subnets: dict[ipaddress.IPv4Network, str] = {}
    first = _ipv4(fabric.ip)
    if first is not None:
        subnets[ipaddress.IPv4Network(f"{first}/{prefix}", strict=False)] = f"fabric.ip {first} ({fabric.netdev})"
    for netdev, text in fabric.addresses.items():
        path = fabric.at("addresses", netdev)
        if netdev == fabric.netdev:
            yield Diagnostic(
                path, f"{netdev} is fabric.netdev, whose address is fabric.ip: remove it here", at_key=True
            )
            continue
        if port_of(netdev) not in ports:
            allowed = sorted({t for p in ports for t in (p, twin(p)) if t} - {fabric.netdev})
            yield Diagnostic(
                path,
                f"{netdev} is not a fabric netdev of {node.name}: write one of fabric.netdevs or a twin of one "
                f"({', '.join(allowed)})",
                at_key=True,
            )
        address = _address(text, "fabric", f"write the IPv4 address {netdev} gets (e.g. 192.168.101.10)")
        problem = _map_address_problem(address, netdev, text, taken)
        if problem:
            yield error(path, problem)
            continue
        assert isinstance(address, ipaddress.IPv4Address)
        if address.is_loopback:  # as for fabric.ip: one machine's nodes only (the tests' fake cluster)
            yield warning(path, f"{address} is a loopback address: only nodes on one machine can reach it")
        taken[text] = f"the address of {netdev} on {node.name}"
        subnet = ipaddress.IPv4Network(f"{address}/{prefix}", strict=False)
        if subnet in subnets:
            hint = f" (NVIDIA puts a twin on the next /24: {next_subnet(address)})" if prefix == 24 else ""
            yield error(
                path,
                f"{address} is on {subnet} with {subnets[subnet]}: each fabric netdev of a node needs a "
                f"/{prefix} subnet of its own{hint}",
            )
        else:
            subnets[subnet] = f"{address} ({netdev})"


def _map_address_problem(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | str, netdev: str, text: str, taken: dict[str, str]
) -> str | None:
    if isinstance(address, str):
        return address
    if address.version != 4:
        return f"{address} is IPv6: RoCE v2 needs an IPv4 address (an IPv4 GID) on {netdev}"
    if address.is_unspecified or address.is_multicast:
        return f"{address} cannot be a node's fabric address"
    if text in taken:
        return f"{text} is already {taken[text]}; every address is used once in the cluster"
    return None


def _ipv4(text: str) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        return None


def next_subnet(address: ipaddress.IPv4Address) -> str:
    """The same host part on the next /24, NVIDIA's place for a twin: 192.168.100.10 -> 192.168.101.10."""
    return str(ipaddress.IPv4Address((int(address) + 256) % (1 << 32)))


def _address(text: str, plane: str, otherwise: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    """A node's address on `plane`, or why `text` is not one (`otherwise`: what to write instead of a name)."""
    scope = bad_scope(text)
    if scope:
        return scope
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        prefixed = _without_prefix(text)
        if prefixed is not None:
            return f"'{text}' must be the {plane} address alone, without the prefix length: write {prefixed}"
        return f"'{text}' is not an IP address; {otherwise}"


def _without_prefix(value: str) -> str | None:
    """The address of an interface written as ADDRESS/PREFIX (as `ip addr` shows it), or None."""
    try:
        return str(ipaddress.ip_interface(value).ip) if "/" in value else None
    except ValueError:
        return None


def workers_have_ssh(d: Deployment) -> Iterator[Diagnostic]:
    for node in d.nodes[1:]:
        if not node.ssh:
            yield error(node.location, "a worker needs an 'ssh' address (its management address)")


def roce_name(netdev: str) -> str:
    """enp1s0f1np1 -> rocep1s0f1 (how the kernel names a CX-7 port's RDMA device after its PCI
    address); "" when the name is not of that shape."""
    match = re.fullmatch(r"en(P?\d*p\d+s\d+f\d+)(np\d+)?", netdev)
    return f"roce{match.group(1)}" if match else ""


def layout(d: Deployment) -> Iterator[Diagnostic]:
    engine, gpus = d.spec.engine, d.total_gpus
    tp, pp, dp = engine.tensor_parallel, engine.pipeline_parallel, engine.data_parallel
    s = "s" if gpus != 1 else ""
    if dp == 1 and tp * pp != gpus:
        yield error(
            engine.at("tensor_parallel"),
            f"tensor_parallel x pipeline_parallel = {tp} x {pp} = {tp * pp}, but the nodes have "
            f"{gpus} GPU{s}; they must be equal",
        )
    elif tp * pp * dp != gpus:
        hint = f"; write data_parallel: {gpus // (tp * pp)}" if gpus % (tp * pp) == 0 else ""
        yield error(
            engine.at("data_parallel"),
            f"tensor_parallel x pipeline_parallel x data_parallel = {tp} x {pp} x {dp} = {tp * pp * dp}, but the "
            f"nodes have {gpus} GPU{s}; they must be equal{hint}",
        )
    if dp > 1 and d.engine.replicas_whole_per_node:
        yield from _whole_replicas(d)
    arch = d.spec.model.architecture
    for count, what in (
        (arch.attention_heads, "attention heads"),
        (arch.kv_heads, "KV heads"),
        (None if engine.expert_parallel else arch.experts, "experts"),
    ):
        if count is None or _divides(tp, count, kv=what == "KV heads"):
            continue
        # For the GPUs of one replica, not tp x pp: that is what the layout must equal, and it stays small
        # where tensor_parallel (unbounded in the schema) would make the search run for ever.
        alternative = _layout_alternative(arch, max(gpus // dp, 1))
        hint = f"; try tensor_parallel: {alternative[0]}, pipeline_parallel: {alternative[1]}" if alternative else ""
        yield error(
            engine.at("tensor_parallel"), f"tensor_parallel {tp} does not divide the model's {count} {what}" + hint
        )
    yield from _expert_parallel(d)


def _whole_replicas(d: Deployment) -> Iterator[Diagnostic]:
    """An engine whose multi-node data parallel starts whole replicas per node (vLLM's
    --data-parallel-size-local)."""
    engine = d.spec.engine
    per_replica = engine.tensor_parallel * engine.pipeline_parallel
    for node in d.spec.cluster.nodes:
        if node.gpus % per_replica:
            yield error(
                engine.at("data_parallel"),
                f"{node.name} has {node.gpus} GPU{'s' if node.gpus != 1 else ''}, no whole number of replicas of "
                f"tensor_parallel x pipeline_parallel = {per_replica}: {d.engine.name}'s data parallel runs each "
                "replica on one node; use tensor_parallel and pipeline_parallel that divide every node's GPUs, or "
                "data_parallel: 1 to spread one replica over the nodes",
            )


def _expert_parallel(d: Deployment) -> Iterator[Diagnostic]:
    """Expert parallel spreads whole experts over tensor_parallel x data_parallel GPUs. SGLang needs the
    experts to divide evenly (its expert location map asserts it); vLLM gives the first ranks one more."""
    engine, experts = d.spec.engine, d.spec.model.architecture.experts
    if not engine.expert_parallel:
        return
    size = engine.tensor_parallel * engine.data_parallel
    path = engine.at("expert_parallel")
    if size == 1:
        yield warning(
            path, "expert parallel over one GPU changes nothing; raise tensor_parallel or data_parallel, or remove it"
        )
    elif experts is None:
        return
    elif experts < size:
        yield error(
            path,
            f"expert parallel over {size} GPUs (tensor_parallel x data_parallel) leaves {size - experts} of them "
            f"without an expert (the model has {experts}); remove expert_parallel",
        )
    elif experts % size and d.engine.experts_evenly:
        yield error(
            path,
            f"{d.engine.name} spreads experts evenly: {experts} experts over {size} GPUs (tensor_parallel x "
            "data_parallel) do not divide; choose a layout whose tensor_parallel x data_parallel divides "
            f"{experts}, or remove expert_parallel",
        )
    elif experts % size:
        yield warning(
            path,
            f"{experts} experts over {size} GPUs (tensor_parallel x data_parallel) do not divide: vLLM gives the "
            "first ranks one expert more, so they carry more load",
        )


def _divides(tp: int, count: int, kv: bool) -> bool:
    """KV heads may also be replicated: TP a multiple of them works too."""
    return count % tp == 0 or (kv and tp % count == 0)


def _layout_alternative(arch: Architecture, gpus: int) -> tuple[int, int] | None:
    for tp in range(gpus, 0, -1):
        if gpus % tp:
            continue
        heads_ok = all(c is None or c % tp == 0 for c in (arch.attention_heads, arch.experts))
        if heads_ok and (arch.kv_heads is None or _divides(tp, arch.kv_heads, kv=True)):
            return tp, gpus // tp
    return None


RULES = (
    plain_values,
    no_placeholders,
    head_exists,
    unique_nodes,
    fabric_addresses,
    fabric_map,
    control_planes,
    workers_have_ssh,
    layout,
)
