"""`sparkc explain`: every resolved setting, per node, with where it came from, and what runs where."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from compiler.diagnostics import printable
from compiler.output.runs_where import RunsWhere, formed, placeholders, runs_where, shown
from compiler.plan import Plan
from compiler.sizes import gigabytes


def explain_json(plan: Plan) -> dict[str, Any]:
    """The plan's own keys, and under `runs_where` the same rows as the text's last part and PLAN.md."""
    return {**asdict(plan), "runs_where": asdict(runs_where(plan))}


def explain_text(plan: Plan) -> str:
    lines = [
        f"deployment {plan.name}: {plan.engine_kind}, {plan.backend} backend, {len(plan.nodes)} node(s), "
        f"head {plan.head}",
        f"image {plan.image} (profile {plan.profile or 'none'}), entrypoint {plan.entrypoint_mode}",
        "",
        "settings:",
    ]
    for s in plan.settings:
        lines.append(f"  {s.name:<28} {s.value:<28} {s.source:<8} {s.why}".rstrip())
    lines += ["", "requested -> effective:"]
    for e in plan.effective:
        mark = "" if not e.differs else f"   DIFFERS: {e.reason}"
        lines.append(f"  {e.setting:<28} {e.requested or '(unset)'} -> {e.effective or '(engine default)'}{mark}")
    lines += ["", "profile and quirks:"] + [f"  - {q}" for q in plan.quirks]
    if plan.hooks:
        lines += [
            "",
            f"hooks (container.hooks), run in each container before the engine, sha256 {plan.hooks.pre_engine_sha256}:",
        ]
        lines += [f"  pre_engine[{i}]: {command}" for i, command in enumerate(plan.hooks.pre_engine)]
        lines += [f"  patch {f.path} sha256 {f.sha256}" for f in plan.hooks.patches]
    if plan.host_hooks:
        host = plan.host_hooks
        lines += [
            "",
            f"host hooks (cluster.hooks), run on each node's host before the containers start, as {host.runs_as}, "
            f"sha256 {host.sha256}:",
        ]
        lines += [f"  on {node}: pre_launch[{i}]: {c}" for node in host.nodes for i, c in enumerate(host.pre_launch)]
    for node in plan.nodes:
        lines += [
            "",
            f"node {node.name} ({node.role}, rank {node.rank}, {node.ssh_target or 'local on the head'}, "
            f"container {node.container_name}):",
        ]
        if node.planes:
            lines.append(
                f"  control plane {node.planes.control_ip} on {node.planes.control_netdev}; "
                f"data plane {', '.join(node.planes.data_netdevs)}"
                + (f", RDMA {', '.join(node.hcas)}" if node.hcas else "")
            )
        if node.budget is not None:
            budget = gigabytes(node.budget.bytes) if node.budget.bytes else "not known"
            lines.append(f"  memory budget {budget} of {gigabytes(node.budget.room)} for engines: {node.budget.how}")
        for s in node.env:
            lines.append(f"  {s.name:<32} {s.value:<28} {s.source:<8} {s.why}".rstrip())
    # An own profile's family, notes and side effects are free text: none of it may reach the terminal raw.
    return "\n".join(printable(line) for line in [*lines, "", *runs_where_lines(plan, runs_where(plan))])


def runs_where_lines(plan: Plan, view: RunsWhere) -> list[str]:
    """The command lines per node, as PLAN.md shows them: the head's once, each other node's differences."""
    waves = "; then ".join(", ".join(wave) for wave in plan.start_waves)
    lines = [
        f"what runs where (containers started in waves: {waves}):",
        f"  {view.head} (head) runs, besides an -e NAME=VALUE for each variable of its environment:",
        *(f"    {shown(group)}" for group in view.container),
    ]
    if plan.engine_files:
        lines.append(f"  {placeholders(plan)}")
    for node in view.nodes:
        if node.name == view.head:
            continue
        lines.append(f"  {node.name} ({node.role}, rank {node.rank}, over ssh {node.ssh}) runs the same but for:")
        for c in node.changes:
            if c.head and c.node:
                lines.append(f"    {shown(c.head)} -> {shown(c.node)}")
            else:
                lines.append(f"    {'+ ' + shown(c.node) if c.node else '- ' + shown(c.head)}")
    if view.engine:
        lines.append(f"  then, once {formed(plan)}, docker exec in {plan.head_node.container_name} runs the engine:")
        lines += [f"    {shown(group)}" for group in view.engine]
    if view.differing_env:
        lines.append("  environment that differs per node:")
        for row in view.differing_env:
            values = "  ".join(f"{n.name}={v or '(unset)'}" for n, v in zip(view.nodes, row.values, strict=True))
            lines.append(f"    {row.name:<30} {values}")
    return lines
