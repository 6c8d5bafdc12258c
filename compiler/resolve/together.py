"""Deployments compiled together to run side by side on one cluster: what they must not share.

A node is the same machine in two specs where it has the same name (a shared cluster file gives them the
same nodes). On each node the deployments' containers, fixed ports and memory budgets must not overlap;
every problem is reported against the spec that has it, naming the other deployment and its spec file.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.diagnostics import Diagnostic, Path, error
from compiler.plan import HeadPort, NodePlan, Plan
from compiler.resolve.budget import OS_RESERVE_GB
from compiler.sizes import gigabytes

# The spec field that moves each kind of port (the Ray ports that have none move with the backend).
PORT_FIELD = {"API": "engine.port", "Ray": "launch.ray_port", "rendezvous": "launch.master_port"}
PORT_FIELD["fabric probe"] = "launch.master_port"


def _path(dotted: str) -> Path:
    return tuple(dotted.split("."))


def _who(plan: Plan) -> str:
    return f"{plan.name} ({plan.spec_path})"


def check_together(plans: Sequence[Plan]) -> list[list[Diagnostic]]:
    """The problems of each plan (in the order given) beside the others."""
    found: list[list[Diagnostic]] = [[] for _ in plans]
    _names(plans, found)
    nodes = sorted({n.name for plan in plans for n in plan.nodes})
    for node in nodes:
        here = [(i, n) for i, plan in enumerate(plans) if (n := _on(plan, node)) is not None]
        if len(here) > 1:
            _ports(plans, node, here, found)
            _memory(plans, node, here, found)
    return found


def _on(plan: Plan, node: str) -> NodePlan | None:
    return next((n for n in plan.nodes if n.name == node), None)


def _names(plans: Sequence[Plan], found: list[list[Diagnostic]]) -> None:
    """One name per deployment: its containers (sparkc-NAME-NODE), labels and systemd unit derive from it."""
    names: dict[str, int] = {}
    for i, plan in enumerate(plans):
        first = names.setdefault(plan.name, i)
        if first != i:
            found[i].append(
                error(
                    ("name",),
                    f"deployment {plan.name!r} is also the deployment in {plans[first].spec_path}: the containers, "
                    "labels and systemd unit of a deployment derive from its name; give each its own name",
                )
            )


def _ports(plans: Sequence[Plan], node: str, here: list[tuple[int, NodePlan]], found: list[list[Diagnostic]]) -> None:
    taken: dict[int, tuple[int, HeadPort]] = {}
    for i, n in here:
        for port in n.ports:
            first = taken.setdefault(port.port, (i, port))
            if first[0] == i:
                continue
            other, theirs = plans[first[0]], first[1]
            field = PORT_FIELD.get(port.what, "engine.backend")
            fix = f"give {plans[i].name} another {field}"
            if field == "engine.backend":
                fix = f"two Ray clusters cannot share {node} on Ray's fixed ports: use engine.backend: native for one"
            found[i].append(
                error(
                    _path(field),
                    f"port {port.port} on {node} is {plans[i].name}'s {port.what} port and the {theirs.what} "
                    f"port of {_who(other)}: {fix}",
                )
            )


def _memory(plans: Sequence[Plan], node: str, here: list[tuple[int, NodePlan]], found: list[list[Diagnostic]]) -> None:
    budgets = [(i, n.budget) for i, n in here if n.budget is not None]
    unknown = [(i, b) for i, b in budgets if not b.bytes]
    for i, b in unknown:
        others = ", ".join(plans[j].name for j, _ in budgets if j != i)
        found[i].append(
            error(
                _path(b.setting),
                f"{plans[i].name} shares {node} with {others}, but its memory there cannot be budgeted: {b.how}",
            )
        )
    if unknown or not budgets:
        return
    need = sum(b.bytes for _, b in budgets)
    room = min(b.room for _, b in budgets)
    if need <= room:
        return
    parts = " + ".join(f"{plans[i].name} {gigabytes(b.bytes)} ({b.how})" for i, b in budgets)
    total_gb = room / 1e9 + OS_RESERVE_GB
    for i, b in budgets:
        found[i].append(
            error(
                _path(b.setting),
                f"{node} cannot hold these deployments together: {parts} = {gigabytes(need)}, more than its "
                f"{total_gb:g} GB less {OS_RESERVE_GB} GB for the OS ({gigabytes(room)}); lower "
                "engine.gpu_memory_utilization (or engine.kv_cache_memory) so that they add up to at most "
                f"{gigabytes(room)}",
            )
        )
