"""`sparkc explain` as text: every resolved setting, per node, with where it came from."""

from __future__ import annotations

from compiler.diagnostics import printable
from compiler.plan import Plan


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
        for s in node.env:
            lines.append(f"  {s.name:<32} {s.value:<28} {s.source:<8} {s.why}".rstrip())
    # An own profile's family, notes and side effects are free text: none of it may reach the terminal raw.
    return "\n".join(printable(line) for line in lines)
