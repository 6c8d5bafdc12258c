"""`sparkc discover`: probe each host over ssh (one read-only sh script, all hosts at once) and write a
ready `cluster:` section, with a warning for everything that looks wrong. Never part of a compile.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

from compiler.diagnostics import printable
from compiler.resolve.env import FABRIC_PREFIX
from compiler.resolve.rules.cluster import port_of
from compiler.resolve.rules.topology import MESH_NODES
from compiler.resources import data_dir
from compiler.tools.probe import Netdev, NodeFacts, parse

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]*$")  # as the schema takes cluster.nodes[].ssh
USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]*$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$|^[a-z]$")
PLACEHOLDER_IP = "0.0.0.0"  # what a node without a usable fabric netdev gets; the compiler refuses it
PROBE_TIMEOUT_S = 60
# The probe's answer is a few kB; a node may add a motd. Read no more than this of what a node sends
# (stdout; stderr keeps its last part), so a node that answers without end cannot fill this machine's memory.
MAX_ANSWER_BYTES = 1 << 20
MAX_ERROR_BYTES = 64 << 10


@dataclass(frozen=True)
class SshSettings:
    user: str | None = None
    identity_file: str | None = None
    port: int = 22
    connect_timeout: int = 10


@dataclass
class Choice:
    """The fabric of one node: what the cluster section says, and why."""

    facts: NodeFacts
    name: str
    netdev: Netdev | None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    other: Netdev | None = None  # the other CX-7 port, where it is cabled to another node too (mesh, ring)

    @property
    def ip(self) -> str:
        return str(ipaddress.IPv4Interface(self.netdev.ipv4[0]).ip) if self.netdev else PLACEHOLDER_IP

    @property
    def netdevs(self) -> list[str]:
        """fabric.netdevs: the cabled ports, where there are two (else netdev alone, the default)."""
        return [self.netdev.name, self.other.name] if self.netdev and self.other else []

    @property
    def hcas(self) -> list[str]:
        # Both twins of each cabled port (enp1s0f1np1 and enP2p1s0f1np1), where the twin can carry RDMA too:
        # up, with a RoCE v2 IPv4 GID (an address); preflight refuses a listed device without one.
        ports = [p for p in (self.netdev, self.other) if p is not None]
        return sorted({h for p in ports for n in [p, *self.twins_of(p)] if n is p or _usable(n) for h in n.hcas})

    @property
    def addresses(self) -> dict[str, str]:
        """fabric.addresses: the other cabled port's and each twin's own address (setup-fabric keeps them;
        preflight wants their GIDs). One on a subnet an earlier one has is left out: the compile refuses it,
        and the warnings say so."""
        if self.netdev is None:
            return {}
        seen = set(self.netdev.networks)
        found = {}
        ports = [self.netdev, *([self.other] if self.other else [])]
        for n in [*self.twins_of(self.netdev), *(n for p in ports[1:] for n in [p, *self.twins_of(p)])]:
            if n.ipv4 and not seen & set(n.networks):
                found[n.name] = str(ipaddress.IPv4Interface(n.ipv4[0]).ip)
                seen |= set(n.networks)
        return found

    @property
    def twins(self) -> list[Netdev]:
        """The other netdevs of the cabled port that are up (the same port's second PCIe function)."""
        return self.twins_of(self.netdev) if self.netdev else []

    def twins_of(self, port: Netdev) -> list[Netdev]:
        name = port_of(port.name)
        return [n for n in self.facts.netdevs if n.up and n is not port and port_of(n.name) == name]


def _usable(netdev: Netdev) -> bool:
    return bool(netdev.ipv4) and any(netdev.gids.values())


def probe_text() -> str:
    return (data_dir("templates") / "discover" / "probe.sh").read_text(encoding="utf-8")


def ssh_command(host: str, ssh: SshSettings) -> list[str]:
    """ssh's words for one host; the remote command is the fixed `sh -s` and the probe comes on stdin."""
    words = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={ssh.connect_timeout}", "-p", str(ssh.port)]
    if ssh.user:
        words += ["-l", ssh.user]
    if ssh.identity_file:
        words += ["-i", ssh.identity_file]
    return [*words, "--", host, "sh -s"]


def host_key_fix(host: str, ssh: SshSettings, errors: str) -> str:
    """What to do when ssh refused the node's host key (BatchMode asks nothing): '' for other errors. Only a
    connection whose fingerprint the operator compared records a key; ssh-keyscan would take whatever answers."""
    login = " ".join(
        ["ssh", *(["-p", str(ssh.port)] if ssh.port != 22 else []), f"{ssh.user}@{host}" if ssh.user else host]
    )
    compare = "compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the node"
    if "HOST IDENTIFICATION HAS CHANGED" in errors:
        return (
            f" ({host} answers with another host key than the one recorded here: if the node was reinstalled, "
            f"remove the old record with `ssh-keygen -R {host}`, connect once with `{login}` and {compare}; "
            "otherwise something else answers at that address)"
        )
    if "Host key verification failed" in errors:
        return (
            f" (this machine does not know {host}'s host key yet: connect once with `{login}`, {compare}, answer "
            "yes, then run discover again)"
        )
    return ""


@dataclass(frozen=True)
class Answer:
    returncode: int
    stdout: str  # decoded with replacement: a node's motd may be Latin-1
    stderr: str
    cut: bool  # stdout was longer than MAX_ANSWER_BYTES: the process was stopped there


def probe(host: str, ssh: SshSettings) -> NodeFacts | str:
    """The node's facts, or why it could not be probed."""
    try:
        done = answer(ssh_command(host, ssh), probe_text().encode(), PROBE_TIMEOUT_S)
    except FileNotFoundError:
        return "no ssh client on this machine"
    except subprocess.TimeoutExpired:
        return f"no answer within {PROBE_TIMEOUT_S} s"
    if done.returncode != 0 and not done.cut and "\nend" not in "\n" + done.stdout:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"ssh exit status {done.returncode}"
        return reason + host_key_fix(host, ssh, done.stderr)
    facts = parse(host, done.stdout)
    if done.cut:
        facts.warnings.append(f"the node's answer was longer than {MAX_ANSWER_BYTES} bytes; only the first were read")
    return facts


def answer(argv: list[str], stdin: bytes, timeout: float) -> Answer:
    """Run `argv` with `stdin`, keeping at most MAX_ANSWER_BYTES of its output (it is stopped when it sends
    more) and the last MAX_ERROR_BYTES of its errors."""
    out, err = bytearray(), bytearray()
    cut = threading.Event()
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:

        def read_out(stream: IO[bytes]) -> None:
            while chunk := stream.read(65536):
                out.extend(chunk[: MAX_ANSWER_BYTES - len(out)])
                if len(out) >= MAX_ANSWER_BYTES:
                    cut.set()
                    process.kill()
                    return

        def read_err(stream: IO[bytes]) -> None:
            while chunk := stream.read(65536):
                err.extend(chunk)
                del err[:-MAX_ERROR_BYTES]

        assert process.stdin and process.stdout and process.stderr
        readers = [
            threading.Thread(target=read_out, args=(process.stdout,), daemon=True),
            threading.Thread(target=read_err, args=(process.stderr,), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            process.stdin.write(stdin)
            process.stdin.close()
        except OSError:  # it exited without reading the probe: its status and errors say why
            pass
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        finally:
            for reader in readers:
                reader.join(5)  # a child it left behind may hold the pipes open
    return Answer(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), cut.is_set())


def probe_all(hosts: list[str], ssh: SshSettings) -> dict[str, NodeFacts | str]:
    with ThreadPoolExecutor(max_workers=max(1, min(len(hosts), 16))) as pool:
        return dict(zip(hosts, pool.map(lambda h: probe(h, ssh), hosts), strict=True))


def choose(nodes: list[NodeFacts]) -> list[Choice]:
    """The fabric netdev of each node: up, with an IPv4 address; among several, the one on a subnet the
    most other nodes share (the cabled fabric), then one with a RoCE v2 IPv4 GID, then the first twin."""
    names = _names(nodes)
    networks = [{net for n in f.netdevs if n.up for net in n.networks} for f in nodes]
    choices = []
    for i, facts in enumerate(nodes):
        candidates = [n for n in facts.netdevs if n.up and n.ipv4]
        others = [nets for j, nets in enumerate(networks) if j != i]

        def score(n: Netdev, others: list[set[ipaddress.IPv4Network]] = others) -> tuple[int, int]:
            shared = sum(1 for nets in others if nets & set(n.networks))
            return (-shared, 0 if any(n.gids.values()) else 1)

        candidates.sort(key=lambda n: (*score(n), n.name != port_of(n.name), n.name))  # enp1s0f1np1 before its twin
        choice = Choice(facts, names[i], candidates[0] if candidates else None)
        if candidates:
            # A second port cabled to another node (a mesh or ring): its first twin, as for the first port.
            chosen = port_of(candidates[0].name)
            choice.other = next(
                (n for n in candidates if port_of(n.name) != chosen and score(n)[0] < 0 and n.name == port_of(n.name)),
                None,
            )
        if not candidates:
            choice.warnings.append(
                "no ConnectX-7 netdev is up with an IPv4 address: fabric.ip below is a placeholder; "
                "cable a port and give it an address (sparkc setup-fabric can), then discover again"
            )
        for port, twin in [(p, t) for p in (choice.netdev, choice.other) if p for t in choice.twins_of(p)]:
            if not _usable(twin):
                choice.warnings.append(
                    f"{twin.name}, the twin of {port.name} on the same port, is up without an IPv4 address "
                    f"(so no RoCE v2 IPv4 GID): its RDMA device {', '.join(twin.hcas)} is left out of hcas and NCCL "
                    "uses half of the port; give it an address on a subnet of its own (NVIDIA's two-Spark guide "
                    "puts it on the next /24), then discover again"
                )
        if len(candidates) > 1:
            rest = ", ".join(f"{n.name} ({n.ipv4[0]})" for n in candidates[1:])
            choice.notes.append(f"chose {candidates[0].name}: on the subnet most other nodes share; also up: {rest}")
        choices.append(choice)
    _cluster_warnings(choices)
    if len(choices) > MESH_NODES and all(c.other for c in choices):
        choices[0].warnings.append(
            "every node has two ports cabled to other nodes: a ring? write topology: ring with the nodes in the "
            "order of the cables (each node's port 0 to the next node's port 1), and link_prefix_length"
        )
    if cabling(choices)[0]:
        choices[0].warnings.append(
            "a mesh: every node needs control: {netdev: enP7s7, ip: <its 10 GbE address>}, the network every "
            "node reaches (discover probes the CX-7 ports only): add it to each node"
        )
    return choices


def _names(nodes: list[NodeFacts]) -> list[str]:
    names: list[str] = []
    for i, facts in enumerate(nodes):
        base = re.sub(r"[^a-z0-9-]+", "-", facts.hostname.split(".")[0].lower()).strip("-")[:40].rstrip("-")
        if not _NAME_RE.match(base):
            base = f"node{i + 1}"
        name, n = base, 2
        while name in names:
            name, n = f"{base[:37]}-{n}", n + 1
        if name != facts.hostname:
            facts.warnings.append(f"node name '{name}' (its host name '{facts.hostname}' is not a node name)")
        names.append(name)
    return names


def _cluster_warnings(choices: list[Choice]) -> None:
    counts = Counter(len(c.facts.gpus) for c in choices if c.facts.gpus is not None)
    if len(counts) > 1:
        shown = ", ".join(f"{c.name}: {len(c.facts.gpus)}" for c in choices if c.facts.gpus is not None)
        choices[0].warnings.append(f"nodes disagree on their GPU count ({shown})")
    chosen = [c for c in choices if c.netdev]
    nets = {c.name: {net for p in (c.netdev, c.other) if p for net in p.networks} for c in chosen}
    for c in chosen:
        if len(chosen) > 1 and not any(nets[c.name] & nets[o.name] for o in chosen if o is not c):
            c.warnings.append(f"{c.ip} shares a subnet with no other node: is this port cabled to the others?")


def section(choices: list[Choice], ssh: SshSettings) -> dict[str, Any]:
    """The `cluster:` section as plain data (what JSON prints)."""
    cluster: dict[str, Any] = {}
    ssh_part: dict[str, Any] = {}
    if ssh.user:
        ssh_part["user"] = ssh.user
    if ssh.port != 22:
        ssh_part["port"] = ssh.port
    if ssh_part:
        cluster["ssh"] = ssh_part
    topology, prefix = cabling(choices)
    if topology:
        cluster["topology"] = topology
    if prefix:
        cluster["link_prefix_length"] = prefix
    cluster["nodes"] = [_node(c) for c in choices]
    return {"cluster": cluster}


def cabling(choices: list[Choice]) -> tuple[str | None, int | None]:
    """A mesh where three nodes each have two ports cabled to the others (and its cables' prefix, where
    it is not NCCL's 24); None otherwise. Four or more such nodes are a ring, whose order only the
    cabling tells: that one is a warning, not a guess."""
    if len(choices) < 3 or not all(c.other for c in choices) or len(choices) > MESH_NODES:
        return None, None
    prefixes = {ipaddress.IPv4Interface(p.ipv4[0]).network.prefixlen for c in choices for p in (c.netdev, c.other) if p}
    prefix = prefixes.pop() if len(prefixes) == 1 else None
    return "mesh", prefix if prefix != FABRIC_PREFIX else None


def _node(c: Choice) -> dict[str, Any]:
    node: dict[str, Any] = {"name": c.name, "ssh": c.facts.host}
    node["fabric"] = {"ip": c.ip, "netdev": c.netdev.name if c.netdev else "FILL-IN"}
    if c.netdevs:
        node["fabric"]["netdevs"] = c.netdevs
    if c.hcas:
        node["fabric"]["hcas"] = c.hcas
    if c.addresses:
        node["fabric"]["addresses"] = c.addresses
    if c.facts.gpus:
        node["gpus"] = len(c.facts.gpus)
    return node


def all_warnings(choices: list[Choice]) -> list[tuple[str, str]]:
    return [(c.name, w) for c in choices for w in [*c.facts.warnings, *c.warnings]]


def to_json(choices: list[Choice], ssh: SshSettings) -> str:
    return json.dumps(section(choices, ssh), indent=2) + "\n"


def to_yaml(choices: list[Choice], ssh: SshSettings, unreachable: dict[str, str]) -> str:
    data = section(choices, ssh)["cluster"]
    out = [
        "# Written by sparkc discover. Paste this section into a spec, or keep it as a file of its own",
        "# (cluster.yaml) and write `cluster: {file: cluster.yaml}` in each spec that runs on this cluster.",
        "# ssh is the management address; fabric is the ConnectX-7 port every NCCL/Ray/engine address uses.",
    ]
    out += [f"# UNREACHABLE {host}: {why} (not in this section)" for host, why in unreachable.items()]
    out.append("cluster:")
    if "ssh" in data:
        out.append("  ssh:")
        out += [f"    {key}: {scalar(value)}" for key, value in data["ssh"].items()]
    out += [f"  {key}: {scalar(data[key])}" for key in ("topology", "link_prefix_length") if key in data]
    out.append("  nodes:")
    for c, node in zip(choices, data["nodes"], strict=True):
        out += _node_yaml(c, node)
    # Comments carry what the nodes said: no byte of it may end a comment line or reach the terminal raw.
    # The values are plain or JSON-quoted (see scalar), which this leaves as they are.
    return "\n".join(printable(line) for line in out) + "\n"


def _node_yaml(c: Choice, node: dict[str, Any]) -> list[str]:
    facts = c.facts
    gpus = f"{len(facts.gpus)} x {facts.gpus[0]}" if facts.gpus else "GPUs unknown"
    out = [f"    # {facts.hostname or '?'} at {facts.host}: {gpus}"]
    for n in facts.netdevs:
        gids = "; ".join(f"{h} RoCE v2 IPv4 GID {','.join(map(str, i))}" for h, i in n.gids.items() if i)
        addrs = ", ".join(n.ipv4) or "no IPv4"
        link = f"{n.state}, MTU {n.mtu or '?'}"
        out.append(f"    #   {n.name} ({', '.join(n.hcas)}): {link}, {addrs}; {gids or 'no GID'}")
    out += [f"    # {note}" for note in c.notes]
    out += [f"    # WARNING: {w}" for w in [*facts.warnings, *c.warnings]]
    out.append(f"    - name: {scalar(node['name'])}")
    out.append(f"      ssh: {scalar(node['ssh'])}")
    out.append("      fabric:")
    out.append(f"        ip: {scalar(node['fabric']['ip'])}" + ("  # placeholder" if c.netdev is None else ""))
    out.append(f"        netdev: {scalar(node['fabric']['netdev'])}")
    if "netdevs" in node["fabric"]:
        out.append(f"        netdevs: [{', '.join(scalar(n) for n in node['fabric']['netdevs'])}]")
    if "hcas" in node["fabric"]:
        out.append(f"        hcas: [{', '.join(scalar(h) for h in node['fabric']['hcas'])}]")
    if "addresses" in node["fabric"]:
        pairs = ", ".join(f"{scalar(n)}: {scalar(ip)}" for n, ip in node["fabric"]["addresses"].items())
        out.append(f"        addresses: {{{pairs}}}")
    if "gpus" in node:
        out.append(f"      gpus: {node['gpus']}")
    return out


_PLAIN = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_./-]*|\d+\.\d+\.\d+\.\d+)$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def scalar(value: Any) -> str:
    """A value as YAML text: plain where YAML reads it back as the same string, else JSON-quoted."""
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return text if _PLAIN.match(text) and text.lower() not in _YAML_WORDS else json.dumps(text)
