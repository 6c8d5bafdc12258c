"""`sparkc compile --target kubernetes-lws`: the plan as one LeaderWorkerSet (the LWS controller's
`leaderworkerset.x-k8s.io/v1` API) in kubernetes/, with the API Service, built by kustomize.

The leader's pod is the head's, exactly as the kubernetes target writes it, pinned to the head's node. The
workers share one template, so what differs between the workers' `docker run` words must come from the
pod at start: the rank from LWS_WORKER_INDEX (the LWS controller sets it in every container, before the
container's own variables, so the kubelet expands `$(LWS_WORKER_INDEX)` in values and arguments), and the
node's own address from the downward API (status.hostIP: the node's address as Kubernetes knows it; with
hostNetwork the pod's is the same). Anything else that differs between the workers is refused. With one
worker nothing differs: its template holds its own values, and it is pinned to its node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from compiler.diagnostics import Diagnostic, error
from compiler.output.docker_words import DockerRun, read_docker_run
from compiler.output.kubernetes import (
    FOLDER,
    INSTANCE_LABEL,
    KUSTOMIZATION,
    RDMA_RESOURCE,
    ROLE_LABEL,
    SECRET_SUFFIX,
    SERVICE,
    api_service,
    dump,
    labels_of,
    literal,
    pod_spec,
    shared_refusals,
)
from compiler.plan import NodePlan, Plan, Role

TARGET = "--target kubernetes-lws"
API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_FILE = f"{FOLDER}/leaderworkerset.yaml"
# The LWS controller names the group's worker StatefulSet NAME-0; its pods' `controller-revision-hash`
# label adds 11 characters, and a label value holds at most 63. The spec's schema keeps names shorter.
MAX_NAME = 50
# Set by the LWS controller in every container of the group (sigs.k8s.io/lws, api/leaderworkerset/v1).
INDEX_VARIABLE = "LWS_WORKER_INDEX"
# The node's address, from the downward API; defined first so that later values can name it.
ADDRESS_VARIABLE = "SPARKC_NODE_ADDRESS"
HOSTNAME = "kubernetes.io/hostname"

# Stand-ins for the per-worker values while the workers' words are compared; no argument or variable holds
# a NUL byte, so a stand-in never meets a word of the plan.
_INDEX = "\x00index\x00"
_ADDRESS = "\x00address\x00"


@dataclass(frozen=True)
class Workers:
    """The workers' one template: a worker's `docker run` words with its per-worker values as stand-ins."""

    node: NodePlan  # the first worker: its role and GPUs stand for every worker's
    run: DockerRun
    nodes: tuple[str, ...]


def refusals(plan: Plan) -> list[Diagnostic]:
    """What one LeaderWorkerSet cannot express, at the field that asks for it."""
    found = shared_refusals(plan, TARGET) + _names_differ(plan)
    if not found and plan.workers:
        found += _workers(plan)[1]
    return found


def render_lws(plan: Plan) -> dict[str, str]:
    """kubernetes/: the LeaderWorkerSet, the API Service, and the kustomization naming them."""
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["service.yaml", LWS_FILE.removeprefix(f"{FOLDER}/")],
    }
    return {
        SERVICE: dump(_HEADER, api_service(plan)),
        LWS_FILE: dump(_HEADER + _LWS_NOTE + _address_note(plan), leader_worker_set(plan)),
        KUSTOMIZATION: dump(_HEADER + _KUSTOMIZE_NOTE, kustomization),
    }


_HEADER = f"# Written by sparkc compile {TARGET}; compile again rather than edit.\n"
_KUSTOMIZE_NOTE = f"""\
# kubectl apply -k DIR/kubernetes, on a cluster that runs the LeaderWorkerSet controller (sigs.k8s.io/lws).
# Adapt it with your own kustomization that names this folder: a namespace; the RDMA resource where your
# device plugin names another than {RDMA_RESOURCE}; the Secret {{name}}{SECRET_SUFFIX} with one key per
# variable of container.secrets (created by you, never here).
"""
_LWS_NOTE = """\
# One group: the leader runs on the head's node, each worker on one of the other nodes. When a pod or a
# container of the group restarts, the controller recreates the whole group (a distributed engine cannot
# take a rank back). Kubernetes sets no ulimits: the container runtime's own limits apply (RDMA needs
# memlock unlimited: containerd's systemd unit sets LimitMEMLOCK=infinity; check yours).
"""


def _address_note(plan: Plan) -> str:
    if not plan.workers or not _uses(_workers(plan)[0].run, _ADDRESS):
        return ""
    return (
        f"# The workers read their own address from status.hostIP ({ADDRESS_VARIABLE}): each worker node's\n"
        "# address in Kubernetes (the kubelet's --node-ip) must be the one the spec gives it for the engine's\n"
        "# control traffic.\n"
    )


def leader_worker_set(plan: Plan) -> dict[str, Any]:
    head = next(node for node in plan.nodes if node.role is Role.HEAD)
    leader = {
        "metadata": {"labels": labels_of(plan, head)},
        "spec": pod_spec(plan, head, _run(plan, head), {"nodeSelector": {HOSTNAME: head.name}}),
    }
    group: dict[str, Any] = {"size": len(plan.nodes)}
    # A group restarts as a whole: NCCL's communicators and Ray's cluster do not survive losing a member.
    group["restartPolicy"] = "RecreateGroupOnPodRestart"
    if plan.workers:
        workers, problems = _workers(plan)
        if problems:
            raise ValueError(f"the workers differ: {problems[0].message}")
        group["leaderTemplate"] = leader
        group["workerTemplate"] = _worker_template(plan, workers)
    else:
        group["workerTemplate"] = leader  # a group of one: its one pod is the leader, made from this template
    return {
        "apiVersion": API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": plan.name, "labels": labels_of(plan)},
        "spec": {
            "replicas": 1,
            # The workers start with the leader, not once it is ready: the head's engine answers /health
            # only after the workers have joined. Under Ray their init container waits for the head.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": group,
        },
    }


def _worker_template(plan: Plan, workers: Workers) -> dict[str, Any]:
    labels = labels_of(plan) | {ROLE_LABEL: str(Role.WORKER)}
    if len(workers.nodes) == 1:
        placement: dict[str, Any] = {"nodeSelector": {HOSTNAME: workers.nodes[0]}}
    else:
        on_a_worker = {"key": HOSTNAME, "operator": "In", "values": list(workers.nodes)}
        placement = {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [on_a_worker]}]
                    }
                },
                # One pod of the deployment per node: each worker holds its node's GPU and the host's ports.
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {INSTANCE_LABEL: plan.name}}, "topologyKey": HOSTNAME}
                    ]
                },
            }
        }
    pod = pod_spec(plan, workers.node, workers.run, placement, _template_word)
    if _uses(workers.run, _ADDRESS):
        (container,) = pod["containers"]
        address = {"name": ADDRESS_VARIABLE, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
        container["env"] = [address, *container["env"]]
    return {"metadata": {"labels": labels}, "spec": pod}


def _template_word(word: str) -> str:
    """A word of the workers' template as the kubelet must be given it: the stand-ins become the variables
    the kubelet expands, everything else reaches the container as written."""
    escaped = literal(word)
    return escaped.replace(_INDEX, f"$({INDEX_VARIABLE})").replace(_ADDRESS, f"$({ADDRESS_VARIABLE})")


def _uses(run: DockerRun, stand_in: str) -> bool:
    return any(stand_in in word for word in (*run.args, *(value for _, value in run.env)))


def _run(plan: Plan, node: NodePlan) -> DockerRun:
    return read_docker_run(node.docker_run, plan.image)


def _names_differ(plan: Plan) -> list[Diagnostic]:
    """Every node's interface and HCA names must agree: NCCL, Gloo and UCX read them from the template."""
    names: dict[str, Callable[[NodePlan], str]] = {
        "fabric netdev": lambda n: n.netdev,
        "data netdevs": lambda n: " ".join(n.data_netdevs),
        "control netdev": lambda n: n.control_netdev,
        "HCAs": lambda n: ",".join(n.hcas),
    }
    differ: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for what, value in names.items():
        values = tuple(value(n) or "none" for n in plan.nodes)
        if len(set(values)) > 1 and values not in seen:  # without control and data planes, one netdev is all three
            seen.add(values)
            differ.append(
                f"{what} (" + "; ".join(f"{n.name}: {v}" for n, v in zip(plan.nodes, values, strict=True)) + ")"
            )
    if not differ:
        return []
    return [
        error(
            ("cluster", "nodes"),
            f"{TARGET}: the nodes' interface names differ: {', '.join(differ)}; a LeaderWorkerSet gives every "
            "worker one template, which names them once: use --target kubernetes (one StatefulSet per node)",
        )
    ]


def _workers(plan: Plan) -> tuple[Workers, list[Diagnostic]]:
    """The workers' one template, or why there is none: the words that differ between workers must be the
    rank or the node's own address."""
    nodes = plan.workers
    runs = [_run(plan, node) for node in nodes]
    if len(nodes) == 1:
        return Workers(nodes[0], runs[0], (nodes[0].name,)), []
    marked = [_mark_address(run, node.control_ip) for node, run in zip(nodes, runs, strict=True)]
    found: list[Diagnostic] = []
    args = [list(r.args) for r in marked]
    merged_args = [_one(column, nodes) for column in zip(*args, strict=False)]
    if len({len(words) for words in args}) > 1:
        found.append(_differ("the engine's arguments", nodes, [" ".join(words) for words in args]))
    for at, word in enumerate(merged_args):
        if word is None and not found:
            what = f"the engine's argument after {args[0][at - 1]}" if at else "the engine's first argument"
            found.append(_differ(what, nodes, [words[at] for words in args]))
    env = [dict(r.env) for r in marked]
    merged_env = {}
    for name in sorted(set().union(*env)):
        given = [each.get(name) for each in env]
        value = _one(given, nodes)
        if value is None:
            found.append(_differ(f"the variable {name}", nodes, [v if v is not None else "unset" for v in given]))
        merged_env[name] = value or ""
    for option in (f.name for f in fields(DockerRun) if f.name not in ("env", "args")):
        values = [str(getattr(r, option)) for r in marked]
        if len(set(values)) > 1:
            found.append(_differ(f"the container's {option}", nodes, values))
    if len({n.gpus for n in nodes}) > 1:
        found.append(_differ("the GPUs", nodes, [str(n.gpus) for n in nodes]))
    template = replace(
        marked[0],
        args=tuple(word or "" for word in merged_args),
        env=tuple((name, merged_env[name]) for name, _ in marked[0].env),
    )
    return Workers(nodes[0], template, tuple(n.name for n in nodes)), found


def _one(column: Sequence[str | None], nodes: tuple[NodePlan, ...]) -> str | None:
    """The workers' one word for a place where each has its own: the same word, or each worker's own rank
    (its LWS index); None where neither."""
    if None not in column and len(set(column)) == 1:
        return column[0]
    if all(word == str(node.rank) for word, node in zip(column, nodes, strict=True)):
        return _INDEX
    return None


def _mark_address(run: DockerRun, address: str) -> DockerRun:
    """`run` with the node's own address, where a word holds it, as its stand-in."""
    own = re.compile(rf"(?<![\d.]){re.escape(address)}(?![\d.])")

    def mark(word: str) -> str:
        return own.sub(_ADDRESS, word)

    return replace(run, args=tuple(mark(w) for w in run.args), env=tuple((n, mark(v)) for n, v in run.env))


def _differ(what: str, nodes: tuple[NodePlan, ...], values: list[str]) -> Diagnostic:
    shown = "; ".join(f"{node.name}: {_shown(value)}" for node, value in zip(nodes, values, strict=True))
    return error(
        ("cluster", "nodes"),
        f"{TARGET}: {what} differs between the workers ({shown}), and is neither their rank nor their own address; "
        "a LeaderWorkerSet gives every worker one template: use --target kubernetes (one StatefulSet per node)",
    )


def _shown(word: str) -> str:
    return word.replace(_ADDRESS, "<own address>")
