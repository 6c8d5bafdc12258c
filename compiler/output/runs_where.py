"""What runs where: each node's container command, shown once (the head's) with each other node's
differences, and the environment split into what every node shares and what differs per node.

One computation for both faces of it: `build/PLAN.md` (compiler/output/plan_page.py) and `sparkc explain`
(compiler/output/explain_view.py and its JSON), so the page and explain can never disagree. Reads the plan only.
"""

from __future__ import annotations

import shlex
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher

from compiler.plan import BUILD_PLACEHOLDER, MPI_SSHD_PLACEHOLDER, Command, NodePlan, Plan, Setting, Words
from compiler.spec.typed import Backend

# What the page and explain show in place of a key engine.args gives: a secret's value is never shown.
HIDDEN_KEY = "<the --api-key of engine.args, not shown>"


@dataclass(frozen=True)
class Change:
    """One group of words where a node's container command differs from the head's."""

    head: Words  # the head's words; () where the node adds words the head has not
    node: Words  # this node's words; () where the node lacks words the head has


@dataclass(frozen=True)
class NodeRun:
    """One node: where it is, how its fabric is cabled, and how its command differs from the head's."""

    name: str
    role: str
    rank: int
    ssh: str  # user@host the launcher reaches it at; "" for the head (commands run there, locally)
    wave: int  # the start wave it is in, from 1
    container: str
    fabric_netdev: str
    fabric_ip: str
    hcas: tuple[str, ...]
    data_netdevs: tuple[str, ...]  # where NCCL's sockets run; (fabric_netdev,) unless planes are split
    control_netdev: str  # the control plane (rendezvous, Gloo, Ray) ...
    control_ip: str  # ... at this address; the fabric's own unless the spec separates the planes
    gpus: int
    changes: tuple[Change, ...]  # () for the head


@dataclass(frozen=True)
class EnvRow:
    """A variable whose value is not the same on every node: its value per node, in node order ("" where unset)."""

    name: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class RunsWhere:
    head: str
    container: Command  # the head's `docker run`, without its `-e NAME=VALUE` words (the environment)
    engine: Command  # Ray: the engine's command, run in the head's container once Ray formed; () otherwise
    nodes: tuple[NodeRun, ...]  # head first, then workers in spec order
    differing_env: tuple[EnvRow, ...]  # sorted by name
    shared_env: tuple[Setting, ...]  # the same on every node, sorted by name
    secrets: tuple[str, ...]  # names only: docker takes the values from the launcher's environment


def runs_where(plan: Plan) -> RunsWhere:
    hide = _Hide(plan.api_key_given)
    commands = {node.name: hide(_without_env(node)) for node in plan.nodes}
    head = plan.head_node
    waves = {name: i for i, wave in enumerate(plan.start_waves, 1) for name in wave}
    nodes = tuple(
        _node_run(node, waves.get(node.name, 0), commands[head.name], commands[node.name]) for node in plan.nodes
    )
    differing, shared = _split_env(plan.nodes)
    return RunsWhere(
        head=head.name,
        container=commands[head.name],
        engine=hide(plan.ray_engine),
        nodes=nodes,
        differing_env=differing,
        shared_env=shared,
        secrets=plan.secrets,
    )


def shown(words: Words) -> str:
    """A group of words as a reader sees them: shell-quoted, with every character that could hide or
    reorder text (line breaks, control and bidirectional format characters) written as <U+XXXX>."""
    return " ".join(shlex.quote(visible(w)) for w in words)


def visible(text: str) -> str:
    return "".join(f"<U+{ord(c):04X}>" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)


def _node_run(node: NodePlan, wave: int, head: Command, own: Command) -> NodeRun:
    return NodeRun(
        name=node.name,
        role=str(node.role),
        rank=node.rank,
        ssh=node.ssh_target,
        wave=wave,
        container=node.container_name,
        fabric_netdev=node.netdev,
        fabric_ip=node.fabric_ip,
        hcas=node.hcas,
        data_netdevs=node.data_netdevs,
        control_netdev=node.control_netdev,
        control_ip=node.control_ip,
        gpus=node.gpus,
        changes=_changes(head, own),
    )


def _without_env(node: NodePlan) -> Command:
    """The node's `docker run` without the `-e NAME=VALUE` words of its environment (shown apart);
    a secret's `-e NAME` stays: it is a name, not a value."""
    env = {("-e", f"{s.name}={s.value}") for s in node.env}
    return tuple(group for group in node.docker_run if group not in env)


def _changes(head: Command, own: Command) -> tuple[Change, ...]:
    """The groups where `own` differs from `head`, in command order. Within a run of changed groups, a
    group of the node's pairs with the head's of the same flag (`--node-rank 0` -> `--node-rank 1`,
    `--node-ip-address=A` -> `--node-ip-address=B`), or else with the one in the same place where both
    runs are as long; what is left reads as the head's groups dropped and the node's added."""
    found: list[Change] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, head, own, autojunk=False).get_opcodes():
        if op != "equal":
            found += _paired(head[i1:i2], own[j1:j2])
    return tuple(found)


def _paired(head: Command, own: Command) -> list[Change]:
    if len(head) == len(own):
        return [Change(h, o) for h, o in zip(head, own, strict=True)]
    left = list(own)
    changes = []
    for h in head:
        match = next((o for o in left if _flag(o) == _flag(h)), None)
        if match is not None:
            left.remove(match)
        changes.append(Change(h, match or ()))
    return changes + [Change((), o) for o in left]


def _flag(group: Words) -> str:
    return group[0].partition("=")[0] if group else ""


def _split_env(nodes: tuple[NodePlan, ...]) -> tuple[tuple[EnvRow, ...], tuple[Setting, ...]]:
    per_node = [{s.name: s for s in node.env} for node in nodes]
    names = sorted({name for env in per_node for name in env})
    differing, shared = [], []
    for name in names:
        values = tuple(env[name].value if name in env else "" for env in per_node)
        everywhere = all(name in env for env in per_node)
        if everywhere and len(set(values)) == 1:
            shared.append(per_node[0][name])
        else:
            differing.append(EnvRow(name, values))
    return tuple(differing), tuple(shared)


@dataclass(frozen=True)
class _Hide:
    """Replaces the key engine.args gives, as a word of its own or after `=`, wherever it stands."""

    key: str

    def __call__(self, command: Command) -> Command:
        if not self.key:
            return command
        return tuple(tuple(self._word(w) for w in group) for group in command)

    def _word(self, word: str) -> str:
        if word == self.key:
            return HIDDEN_KEY
        flag, eq, value = word.partition("=")
        return f"{flag}={HIDDEN_KEY}" if eq and value == self.key and flag.startswith("-") else word


def formed(plan: Plan) -> str:
    """When an engine started by docker exec in the head's container starts: once its group formed."""
    if plan.backend is Backend.MPI:
        return f"the head's container reaches sshd in every container (port {plan.mpi_ssh_port}) as mpirun will"
    return "Ray reports every node"


def placeholders(plan: Plan) -> str:
    """What the words the launcher fills in stand for (an engine's own files, backend mpi)."""
    files = ", ".join(sorted(path.rsplit("/", 1)[1] for path, _ in plan.engine_files))
    words = f"{BUILD_PLACEHOLDER} stands for this folder on the head (its {files})"
    if plan.mpi_ssh_port:
        words += f", {MPI_SSHD_PLACEHOLDER} for the library's sshd script that every container runs for mpirun"
    return words + "; the launcher puts them in."
