"""`PLAN.md`: the page a reviewer reads in a pull request, rendered from the plan (and runs_where's rows).

Every value that came from the user reaches the page through `code` (an inline code span, safe in a
table cell) or `fenced` (a code block) or `mermaid_text` (a Mermaid label): in a code span Markdown
makes no links, emphasis or HTML, and these functions make sure no value can end its span, its cell,
its block or its label. Text of sparkc's own is written as it is.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence

from compiler.output.runs_where import Change, RunsWhere, formed, placeholders, runs_where, shown, visible
from compiler.plan import BUILT_IMAGE_RECORD, Command, Plan
from compiler.sizes import gigabytes
from compiler.spec.typed import Topology

PAGE = "PLAN.md"
BUILD_SCRIPT = "build-image.sh"  # written only where the spec has container.build
BUILD_PURPOSE = (
    "Run on the head, first: builds the image from `container.build` with `docker build` and records its image ID; "
    "`distribute.sh` then copies it on."
)

# One line per generated file: what it does (the scripts' own headers say the same at more length).
FILE_PURPOSES = {
    "launch-cluster.sh": "Run on the head: checks every node, starts the containers wave by wave, forms the "
    "cluster and waits until the API answers.",
    "stop-cluster.sh": "Stops and removes the deployment's containers on every node, workers first (the "
    "compile cache stays).",
    "status.sh": "Shows each node's container, the Ray cluster where there is one, whether the API answers, "
    "what the engine is doing (its metrics) and the last launch's timeline.",
    "logs.sh": "Gathers every node's container log under `logs/`, or follows the head's.",
    "distribute.sh": "Run on the head: copies the image and the model folder over the fabric to nodes that "
    "lack them or hold another build, from the head to each at once (`--chain` passes the image node to node, "
    "which needs each node's ssh to the next: setup-fabric does not set that up); host keys are checked under "
    "each node's ssh name.",
    "fetch-model.sh": "Run on the head: downloads `model.repo` at its revision from the Hugging Face hub inside the "
    "image, resumable, after checking the disk has room (`HF_TOKEN` from the environment).",
    "bench.sh": "Run on the head while the deployment serves: the engine's own serving benchmark at concurrencies "
    "1, 4 and 16 with random prompts, one JSON per run and a summary table (`bench/<time>/`).",
    "install-service.sh": "Run on the head, as root: installs and enables `systemd/`'s units, which run "
    "`launch-cluster.sh` once after every boot and then `watch.sh` (`--dry-run` shows the steps).",
    "watch.sh": "Run on the head (or by its systemd unit): checks every node's container and a one-token "
    "generation every 30 s, keeps the logs and restarts the deployment on a failure, within a restart budget; "
    "`--once` for one check.",
    "deployment.sh": "The deployment's constants (nodes, image, ports, each node's `docker run` words) and the "
    "spec's sha256, which every script here reads, then the checked load of `lib/`; not run on its own.",
    "manifest.json": "The resolved plan and the sha256 of the spec and of every file here.",
    PAGE: "This page.",
}

_TOPOLOGY = {
    Topology.DIRECT: "fabric: direct cable",
    Topology.SWITCH: "fabric: switch",
    Topology.MESH: "fabric: mesh, no switch",
    Topology.RING: "fabric: ring, no switch",
}


def plan_page(plan: Plan) -> str:
    view = runs_where(plan)
    parts = [
        _header(plan),
        _nodes(view),
        _ssh(plan),
        _diagram(plan, view),
        _per_node_env(view),
        _what_runs_where(plan, view),
        _ports(plan),
        _memory(plan),
        _timeouts(plan),
        _secrets_and_hooks(plan),
        _image_build(plan),
        _files(plan),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


# -- escaping -------------------------------------------------------------------------------------------


def code(value: object) -> str:
    """`value` as inline code, safe in running text and in a table cell. A pipe is written `\\|` outside
    any code span (the table takes it as a character, not a cell's end; inside a span a backslash before
    it would be ambiguous), so the value is split into one span per stretch between its pipes."""
    return "\\|".join(_span(part) for part in visible(str(value)).split("|"))


def _span(text: str) -> str:
    if not text:
        return ""
    # Delimited by more backticks than any run inside, so none of them ends it; padded by a space where
    # the text starts or ends with a backtick or would lose its own edge spaces (CommonMark strips one).
    ticks = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = text[0] == "`" or text[-1] == "`" or (text[0] == text[-1] == " " and text.strip(" ") != "")
    return f"{ticks} {text} {ticks}" if pad else f"{ticks}{text}{ticks}"


def codes(values: Iterable[object], empty: str = "none") -> str:
    shown_values = [code(v) for v in values]
    return ", ".join(shown_values) if shown_values else empty


def fenced(lines: Sequence[str], info: str = "") -> str:
    """A code block whose fence is longer than any run of backticks in it, so no line of it closes it."""
    body = "\n".join(lines)
    ticks = "`" * max(3, max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


_MERMAID_SAFE = frozenset(string.ascii_letters + string.digits + " .:/_-")


def mermaid_text(value: object) -> str:
    """A value inside a quoted Mermaid label: every character but a few plain ones as Mermaid's `#N;`
    entity, so no quote, bracket, pipe, HTML or line break of it can leave the label."""
    return "".join(c if c in _MERMAID_SAFE else f"#{ord(c)};" for c in visible(str(value)))


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _command_lines(command: Command) -> list[str]:
    """A command as a shell reads it, one group of words per line, continued with backslashes."""
    groups = [shown(group) for group in command]
    return [("  " if i else "") + g + (" \\" if i < len(groups) - 1 else "") for i, g in enumerate(groups)]


# -- the sections ---------------------------------------------------------------------------------------


def _header(plan: Plan) -> str:
    source = f"Generated by sparkc {code(plan.sparkc_version)} from {code(plan.spec_path)}"
    if plan.cluster_file:
        source += f" with the cluster section of {code(plan.cluster_file)} (sha256 {code(plan.cluster_file_sha256)})"
    # The spec's sha256 is in manifest.json and deployment.sh: a change of any value would change every line holding it.
    source += " (its sha256: `manifest.json`). Do not edit: change the spec and run `sparkc compile` again."
    profile = f"profile {code(plan.profile)}" if plan.profile else "no profile"
    summary = (
        f"{code(plan.engine_kind)}, {plan.backend} backend, {len(plan.nodes)} node(s), {plan.total_gpus} GPU(s). "
        f"Image {code(plan.image)} ({profile}, entrypoint {plan.entrypoint_mode}). "
        f"Model {code(plan.model_host_path)} served as {code(plan.served_model_name)} at {code(plan.endpoint_url)}."
    )
    if plan.model.aliases:
        summary += f" Also served as {', '.join(code(a) for a in plan.model.aliases)}."
    if plan.model.speculative:
        summary += f"\n\nSpeculative decoding: {code(plan.model.speculative)}."
    return f"# Deployment {code(plan.name)}\n\n{source}\n\n{summary}"


def _nodes(view: RunsWhere) -> str:
    rows = [
        (
            code(n.name),
            n.role,
            str(n.rank),
            code(n.ssh) if n.ssh else "local (the launcher runs here)",
            code(n.fabric_netdev),
            code(n.fabric_ip),
            codes(n.hcas, "none (sockets)"),
            codes(n.data_netdevs),
            f"{code(n.control_ip)} on {code(n.control_netdev)}"
            if (n.control_ip, n.control_netdev) != (n.fabric_ip, n.fabric_netdev)
            else "the fabric",
            str(n.gpus),
        )
        for n in view.nodes
    ]
    header = ("Node", "Role", "Rank", "SSH", "Fabric netdev", "Fabric IP", "HCAs", "Data netdevs", "Control plane")
    return "## Nodes\n\n" + _table((*header, "GPUs"), rows)


def _ssh(plan: Plan) -> str:
    """The options every ssh to a node gets (the scripts', rsync's): ssh reads them before ~/.ssh/config."""
    if not any(n.ssh_target for n in plan.nodes):
        return ""
    return (
        "Every ssh to a node (the scripts', rsync's) runs as "
        + code("ssh " + " ".join(map(shown, plan.ssh_options)))
        + "."
    )


def _diagram(plan: Plan, view: RunsWhere) -> str:
    """The cabling and planes: every node on the fabric (netdev, IP, RDMA devices), on the control plane
    where the spec separates it, and the launcher's ssh from the head to each worker. Node order: rank."""
    fabric = "fabric: one node, nothing cabled" if len(view.nodes) == 1 else _TOPOLOGY[plan.topology]
    lines = ["graph LR", f'  fabric(["{fabric}"])']
    split = any((n.control_ip, n.control_netdev) != (n.fabric_ip, n.fabric_netdev) for n in view.nodes)
    if split:
        lines.append('  control(["control plane"])')
    for n in view.nodes:
        gpus = f"{n.gpus} GPU" + ("" if n.gpus == 1 else "s")
        lines.append(f'  n{n.rank}["{mermaid_text(n.name)} ({n.role}, rank {n.rank}, {gpus})"]')
    for n in view.nodes:
        link = " ".join([n.fabric_netdev, n.fabric_ip, *n.hcas])
        lines.append(f'  n{n.rank} ---|"{mermaid_text(link)}"| fabric')
        if split:
            lines.append(f'  n{n.rank} -.-|"{mermaid_text(n.control_netdev + " " + n.control_ip)}"| control')
    head = next(n for n in view.nodes if n.name == view.head)
    for n in view.nodes:
        if n.ssh:
            lines.append(f'  n{head.rank} -.->|"ssh {mermaid_text(n.ssh)}"| n{n.rank}')
    return "## Cabling and planes\n\n" + fenced(lines, "mermaid")


def _per_node_env(view: RunsWhere) -> str:
    header = ("Variable", *(code(n.name) for n in view.nodes))
    if view.differing_env:
        rows = [(code(r.name), *(code(v) if v else "(unset)" for v in r.values)) for r in view.differing_env]
        differing = _table(header, rows)
    else:
        differing = "One node: nothing differs." if len(view.nodes) == 1 else "Every node's environment is the same."
    shared = ""
    if view.shared_env:
        rows = [
            (code(s.name), code(s.value), f"{s.source}" + (f": {code(s.why)}" if s.why else ""))
            for s in view.shared_env
        ]
        shared = (
            f"<details><summary>The {len(view.shared_env)} variables every node shares</summary>\n\n"
            + _table(("Variable", "Value", "From"), rows)
            + "\n\n</details>"
        )
    return "\n\n".join(p for p in ("## What differs per node", differing, shared) if p)


def _what_runs_where(plan: Plan, view: RunsWhere) -> str:
    waves = "; then ".join(", ".join(code(name) for name in wave) for wave in plan.start_waves)
    parts = [
        "## What runs where",
        f"One container per node, started in waves: {waves}. The head's `docker run`, without its "
        "`-e NAME=VALUE` words (the environment above):",
        fenced(_command_lines(view.container), "bash"),
    ]
    if plan.engine_files:
        parts.append(placeholders(plan))
    if plan.home_mounts:
        parts.append(
            "`~/` in a mount's host path is the home of the ssh user on each node (on the head, the user who "
            "launches): the launcher asks each node for it and puts it there."
        )
    others = [n for n in view.nodes if n.name != view.head]
    if others:
        # A list, not a table: one change a line keeps a node with many differences readable (and every line short).
        items = [
            f"- {code(n.name)} ({n.role}, rank {n.rank}, over ssh {code(n.ssh) if n.ssh else '(local)'}):\n"
            + _changes(n.changes)
            for n in others
        ]
        parts += ["Each other node runs the same command, but for:", "\n".join(items)]
    if view.engine:
        parts += [
            f"Once {formed(plan)}, the engine starts in the head's container "
            f"({code(plan.head_node.container_name)}, by `docker exec`):",
            fenced(_command_lines(view.engine), "bash"),
        ]
    if plan.probe:
        parts.append(
            f"Before the engine, a fabric probe runs one all-reduce across the nodes, in a container of the same image "
            f"on each node (rendezvous at {code(plan.head_fabric_ip)}:{plan.probe_port})."
        )
    return "\n\n".join(parts)


def _changes(changes: tuple[Change, ...]) -> str:
    said = []
    for c in changes:
        if c.head and c.node:
            said.append(f"{code(shown(c.head))} → {code(shown(c.node))}")
        elif c.node:
            said.append(f"adds {code(shown(c.node))}")
        else:
            said.append(f"drops {code(shown(c.head))}")
    return "\n".join(f"  - {s}" for s in said) or "  - nothing"


def _ports(plan: Plan) -> str:
    control = plan.api_port_control
    if control.flag:
        moves = f"`launch-cluster.sh --port N` moves it (the engine's {code(control.flag)})"
    elif control.variable:
        moves = f"`launch-cluster.sh --port N` moves it (the entrypoint's {code(control.variable)})"
    else:
        moves = code(control.fixed)
    rows = [(str(plan.api_port), "API", f"{code(plan.endpoint_url)}; {moves}")]
    rows += [
        (str(p.port), p.what, f"on the head, at {code(plan.head_fabric_ip)}")
        for p in plan.head_ports
        if p.what != "API"
    ]
    listed = {p.port for p in plan.head_ports}
    rows += [
        (str(p.port), p.what, "on the head; the API may not take it") for p in control.taken if p.port not in listed
    ]
    if plan.probe:
        rows.append(
            (str(plan.probe_port), "fabric probe", f"rendezvous at {code(plan.head_fabric_ip)}, before the engine")
        )
    return "## Ports\n\n" + _table(("Port", "What", "Where"), rows)


def _memory(plan: Plan) -> str:
    rows = [
        (code(n.name), gigabytes(b.bytes) if b.bytes else "not known", gigabytes(b.room), b.how)
        for n in plan.nodes
        if (b := n.budget) is not None
    ]
    intro = (
        "What this deployment takes of each node's memory; another deployment may run beside it where the budgets\n"
        "add up to what the node has for engines (its `memory_gb` less the OS's share). Each container carries its\n"
        "budget as the label `sparkc.memory-budget`, and its ports as `sparkc.api-port` and `sparkc.ports`: the\n"
        "launcher's preflight adds up what runs on a node and refuses a launch that would not fit or would take\n"
        "a port in use.\n\n"
    )
    return "## Memory\n\n" + intro + _table(("Node", "Budget", "For engines", "How"), rows)


def _timeouts(plan: Plan) -> str:
    where = plan.engine_timeout_variable or plan.engine_timeout_flag
    engine = (
        f"the engine's own start limit ({code(where)})" if where else "the engine's own start limit (it reads none)"
    )
    rows = [
        (
            "the launcher's wait for the API (`launch.timeout`; `launch-cluster.sh --timeout N` for one launch)",
            str(plan.launch_timeout),
        ),
        (f"{engine}, {plan.engine_timeout_margin} s under the launcher's", str(plan.engine_timeout)),
    ]
    if plan.probe:
        rows.append(("the fabric probe (the launcher waits a little longer)", str(plan.probe_timeout)))
    return "## Timeout budget\n\n" + _table(("What", "Seconds"), rows)


def _secrets_and_hooks(plan: Plan) -> str:
    parts = []
    if plan.secrets:
        parts.append(
            "Secrets, by name only (each container takes the value from the launcher's environment): "
            f"{codes(plan.secrets)}."
        )
    if plan.api_key_given:
        parts.append("`engine.args` gives `--api-key`: its value is in the scripts and the manifest, not on this page.")
    if plan.hooks:
        hooks = plan.hooks
        parts.append(f"Hooks, run in every container before the engine (sha256 {code(hooks.pre_engine_sha256)}):")
        parts.append("\n".join(f"{i}. {code(c)}" for i, c in enumerate(hooks.pre_engine, 1)) or "(no commands)")
        if hooks.patches:
            parts.append("Patch files: " + ", ".join(f"{code(f.path)} ({code(f.sha256)})" for f in hooks.patches) + ".")
    if plan.host_hooks:
        host = plan.host_hooks
        parts.append(
            f"Host hooks (`cluster.hooks`), run by `sh -c` on each node's host before the containers start, as "
            f"{host.runs_as}, node by node: {codes(host.nodes)} (sha256 {code(host.sha256)}):"
        )
        parts.append("\n".join(f"{i}. {code(c)}" for i, c in enumerate(host.pre_launch, 1)) or "(no commands)")
    return "## Secrets and hooks\n\n" + "\n\n".join(parts) if parts else ""


def _image_build(plan: Plan) -> str:
    build = plan.build
    if build is None:
        return ""
    args = ", ".join(code(a) for a in build.args) or "none"
    return (
        "## Image build\n\n"
        f"The image is built, not pulled: run `build-image.sh` first, on the head, {code(plan.head)}. It runs "
        f"`docker build` of {code(build.dockerfile)} in {code(build.context)}, tags the result {code(plan.image)} "
        f"and records its image ID in {code(BUILT_IMAGE_RECORD)}; then `distribute.sh` copies the image to the other "
        f"nodes, then `launch-cluster.sh` starts them.\n\nBuild arguments: {args}."
    )


def _files(plan: Plan) -> str:
    rows = [(code(name), what) for name, what in FILE_PURPOSES.items()]
    if plan.build:
        rows.insert(0, (code(BUILD_SCRIPT), BUILD_PURPOSE))
    return "## Files\n\n" + _table(("File", "What it does"), rows)
