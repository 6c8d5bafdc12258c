"""`sparkc init`: a commented starter spec that validates and compiles as written.

Every value the operator must check carries a `# CHANGE:` comment; the values are plausible ones (a
Spark's fabric addresses, NGC's vLLM image), so `sparkc validate` accepts the file at once and the
operator replaces them one by one. With discover's output the cluster part is the discovered one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

from compiler.diagnostics import format_text, has_errors
from compiler.spec.include import KEY as FILE_KEY
from compiler.spec.load import SpecReadError, load_text, read_spec, to_plain
from compiler.tools.discover import scalar as _scalar

CHANGE = "# CHANGE:"


class InitProblem(Exception):
    """The discover file cannot be used; the message says why."""


@dataclass(frozen=True)
class StarterNode:
    name: str
    ssh: str
    ip: str
    netdev: str
    hcas: tuple[str, ...]
    gpus: int
    addresses: tuple[tuple[str, str], ...] = ()  # fabric.addresses: the twins' and other cable's (netdev, IP)
    netdevs: tuple[str, ...] = ()  # fabric.netdevs: both cabled ports of a mesh node (else netdev alone)


def placeholder_nodes(count: int) -> list[StarterNode]:
    return [
        StarterNode(
            f"spark-{chr(ord('a') + i)}" if i < 26 else f"spark-{i + 1}",
            f"spark-{chr(ord('a') + i)}.local" if i < 26 else f"spark-{i + 1}.local",
            f"192.168.100.{10 + i}",
            "enp1s0f1np1",
            ("rocep1s0f1", "roceP2p1s0f1"),
            1,
        )
        for i in range(count)
    ]


def discovered(path: FilePath) -> tuple[list[StarterNode], dict[str, Any]]:
    """The nodes, and the ssh settings and cabling (topology, link_prefix_length) of a file `sparkc discover`
    wrote (YAML or JSON)."""
    try:
        text = read_spec(path)
    except SpecReadError as exc:
        raise InitProblem(str(exc)) from None
    document, problems = load_text(text, str(path))
    if has_errors(problems):
        raise InitProblem(format_text(problems, str(path), None))
    data = to_plain(document.data)
    cluster = data.get("cluster") if isinstance(data, dict) else None
    if not isinstance(cluster, dict) or not isinstance(cluster.get("nodes"), list) or FILE_KEY in cluster:
        raise InitProblem(f"{path}: not what sparkc discover writes (a 'cluster:' section with 'nodes:')")
    try:
        found = [
            StarterNode(
                str(n["name"]),
                str(n["ssh"]),
                str(n["fabric"]["ip"]),
                str(n["fabric"]["netdev"]),
                tuple(str(h) for h in n["fabric"].get("hcas", [])),
                int(n.get("gpus", 1)),
                tuple((str(k), str(v)) for k, v in n["fabric"].get("addresses", {}).items()),
                tuple(str(d) for d in n["fabric"].get("netdevs", [])),
            )
            for n in cluster["nodes"]
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InitProblem(f"{path}: a node lacks {exc} or has the wrong shape; run sparkc discover again") from None
    if not found:
        raise InitProblem(f"{path}: no nodes")
    ssh = cluster.get("ssh")
    cabling = {k: cluster[k] for k in ("topology", "link_prefix_length") if isinstance(cluster.get(k), (str, int))}
    return found, {**({"ssh": ssh} if isinstance(ssh, dict) else {}), **cabling}


def starter(name: str, nodes: list[StarterNode], settings: dict[str, Any], source: str = "") -> str:
    """The spec's text; `settings`: the cluster's ssh settings and cabling, as discovered."""
    ssh = settings.get("ssh", {})
    switchless = settings.get("topology") in ("mesh", "ring")
    total = sum(n.gpus for n in nodes)
    head = "# Starter spec written by sparkc init"
    head += f" from {source} (sparkc discover)." if source else f" for {len(nodes)} node(s)."
    lines = [
        "# yaml-language-server: $schema=https://sparkc.dev/schemas/spec.schema.json",
        head,
        f"# Lines marked '{CHANGE}' hold example values: replace each, then run",
        "#   sparkc validate THIS-FILE  and  sparkc compile THIS-FILE -o build/",
        "sparkc: 1",
        f"name: {name}  {CHANGE} the deployment's name (container names derive from it)",
        "cluster:",
    ]
    if ssh:
        lines.append("  ssh:")
        lines += [f"    {key}: {_scalar(value)}" for key, value in sorted(ssh.items())]
    else:
        lines.append(f"  # ssh: {{user: aurora, identity_file: /home/aurora/.ssh/id_ed25519}}  {CHANGE} if needed")
    lines += [f"  {key}: {_scalar(settings[key])}" for key in ("topology", "link_prefix_length") if key in settings]
    lines.append("  nodes:  # the first node is the head: the scripts run there")
    for i, n in enumerate(nodes):
        mark = "" if source else f"  {CHANGE} this node's"
        lines += [
            f"    - name: {_scalar(n.name)}",
            f"      ssh: {_scalar(n.ssh)}" + (f"{mark} management address (ssh reaches it there)" if mark else ""),
            # A cable reaches one neighbour: the rendezvous needs the network every node reaches.
            *(
                [f"      control: {{netdev: enP7s7, ip: 10.0.0.{10 + i}}}  {CHANGE} this node's 10 GbE address"]
                if switchless
                else []
            ),
            *(_fabric(n, mark) if source or len(nodes) > 1 else [SOLO_FABRIC]),
            f"      gpus: {n.gpus}",
        ]
    tp, pp = layout(total)
    lines += [
        "container:",
        f"  image: nvcr.io/nvidia/vllm:26.10-py3  {CHANGE} the engine image (the same on every node)",
        "model:",
        f"  path: /models/CHANGE-ME  {CHANGE} the weights' folder, the same absolute path on every node",
        "engine:",
        "  kind: vllm  # or sglang",
        *(["  backend: native  # vLLM's own multi-node mode; ray needs an image with Ray"] if len(nodes) > 1 else []),
        *layout_lines(tp, pp, total),
        "  port: 8000",
        "  # max_model_len: 32768",
        # vLLM starts only where this fraction of the memory is free; its default 0.9 is more than an idle
        # Spark has once vLLM's own init took its share
        "  gpu_memory_utilization: 0.8  # a fraction of the 128 GB a Spark shares with its OS",
        "launch:",
        "  timeout: 3600  # the whole start; a first start on GB10 can take long",
    ]
    return "\n".join(lines) + "\n"


# One node alone talks to itself: it needs no fabric until it joins others.
SOLO_FABRIC = "      # no fabric: one node alone needs none (add fabric: {ip, netdev, hcas} when it joins others)"


def _fabric(n: StarterNode, mark: str) -> list[str]:
    """The node's fabric lines; RDMA devices discover did not find are a placeholder to fill (or sockets)."""
    if n.hcas:
        listed = ", ".join(_scalar(h) for h in n.hcas)
        hcas = f"        hcas: [{listed}]" + ("  # both twins of the port" if mark else "")
    else:
        hcas = (
            f"        hcas: [PLACEHOLDER]  {CHANGE} discover found no RDMA device: list the cabled port's "
            "(ibdev2netdev), or write transport: sockets on every node for NCCL over TCP"
        )
    return [
        "      fabric:  # the ConnectX-7 port every NCCL, Ray and engine address uses",
        f"        ip: {_scalar(n.ip)}" + (f"{mark} fabric address" if mark else ""),
        f"        netdev: {_scalar(n.netdev)}" + (f"{mark} cabled netdev (ibdev2netdev shows it)" if mark else ""),
        hcas,
        *([f"        netdevs: [{', '.join(_scalar(d) for d in n.netdevs)}]"] if n.netdevs else []),
        *(
            [f"        addresses: {{{', '.join(f'{_scalar(k)}: {_scalar(v)}' for k, v in n.addresses)}}}"]
            if n.addresses
            else []
        ),
    ]


def layout(gpus: int) -> tuple[int, int]:
    """Tensor x pipeline parallel for `gpus`: tensor parallel must divide the model's attention heads, which are
    nearly always a power of two, so it takes the largest power of two in `gpus` and pipeline parallel the rest."""
    tp = gpus & -gpus
    return tp, gpus // tp


def layout_lines(tp: int, pp: int, gpus: int) -> list[str]:
    rule = f"x pipeline_parallel must equal the GPUs of all nodes ({gpus})"
    if pp == 1:
        return [f"  tensor_parallel: {tp}  # {rule}"]
    return [
        f"  tensor_parallel: {tp}  # {rule}; tensor_parallel must divide the model's attention heads,",
        f"  pipeline_parallel: {pp}  # nearly always a power of two: {gpus} GPUs run as {tp} x {pp} (layers split)",
    ]
