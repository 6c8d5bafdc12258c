"""deployment.sh's constants: every value of one deployment the scripts read, built from the plan.

Each entry script (launch-cluster.sh, status.sh, ...) finds its folder, sources deployment.sh beside it and
calls its main: the values live there once, the code in lib/. templates/deployment.sh.j2 frames them (the
header, then the checked load of the library). A constant is a name, a typed value and a line that says
why; `render_constants` writes them all the same way (quoted by compiler/output/bash_words.py), so no
template keeps a list of the constants it needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compiler.names import SCRIPT_NAMES, SECRET_NAME, SHELL_NAMES
from compiler.output.bash_words import SplitRuns, comment, lines, quote, split_runs
from compiler.plan import (
    BENCH_RESULTS,
    BUILD_PLACEHOLDER,
    MAX_LAUNCH_TIMEOUT,
    MPI_SSHD_PLACEHOLDER,
    PATCHES_DIR,
    PATCHES_PLACEHOLDER,
    Command,
    NodePlan,
    Plan,
    PortWord,
)

DEPLOYMENT = "deployment.sh"

# A constant's value: one word (str, int, bool: 1 or 0), a list of words (one a line), a command (one group of
# words a line), or a value per node (a read-only associative array keyed by node name).
Value = str | int | bool | tuple[str, ...] | list[str] | Command | Mapping[str, str | int | bool]


@dataclass(frozen=True)
class Constant:
    name: str
    value: Value
    why: str = ""  # the comment above it; "" where the name says it all
    command: bool = False  # a list of word groups, one group a line
    mutable: bool = False  # an option of the script may change it (--no-probe)
    by_name: bool = False  # read through a name reference (compiled_run): shellcheck cannot see the read
    notes: Mapping[int, str] | None = None  # a command's comment lines, each before the group of its index
    packed: bool = False  # a long list of short words: as many a line as fit in WIDTH


@dataclass(frozen=True)
class Code:
    """Lines of bash between the constants, as they are (no value of the spec in them)."""

    text: str


Entry = Constant | Code


def node_map(nodes: Iterable[NodePlan], field: str) -> dict[str, str | int | bool]:
    return {n.name: getattr(n, field) for n in nodes}


def _assignment(c: Constant, placeholder: bool) -> str:
    keyword = "" if c.mutable else "readonly "
    value = c.value
    if isinstance(value, Mapping):
        body = "".join(f"  [{quote(k)}]={'v' if placeholder else quote(v)}\n" for k, v in value.items())
        return f"declare -{'A' if c.mutable else 'rA'} {c.name}=(\n{body})"
    if isinstance(value, (tuple, list)):
        if placeholder:
            return f"{keyword}{c.name}=(v)"
        if not value:
            return f"{keyword}{c.name}=()"
        if c.command:
            notes = c.notes or {}
            body = "\n".join(
                (f"  # {comment(notes[k])}\n" if k in notes else "") + lines([g]) for k, g in enumerate(value)
            )
        elif c.packed:
            body = "\n".join(_packed([quote(w) for w in value]))
        else:
            body = "\n".join("  " + quote(w) for w in value)
        return f"{keyword}{c.name}=(\n{body}\n)"
    return f"{keyword}{c.name}={'v' if placeholder else quote(value)}"


WIDTH = 110


def _packed(items: list[str]) -> list[str]:
    out = ["  "]
    for item in items:
        if len(out[-1]) + len(item) > WIDTH:
            out.append("  ")
        out[-1] += ("" if out[-1] == "  " else " ") + item
    return out


def render_constants(plan: Plan, placeholder: bool = False) -> str:
    """The constants of deployment.sh, each after the line that says why. `placeholder`: every value written
    `v` or `(v)` (compiler/output/lint.py reads the names assigned from that text, so a value that escaped its
    quotes would show as a name of its own)."""
    out = []
    for entry in entries(plan):
        if isinstance(entry, Code):
            out.append(entry.text)
            continue
        if entry.why:
            out.append(f"# {comment(entry.why)}")
        if entry.by_name:
            out.append("# shellcheck disable=SC2034  # read through a name reference in compiled_run")
        out.append(_assignment(entry, placeholder))
    return "\n".join(out)


def _port_places(words: Iterable[PortWord], position: Mapping[tuple[int, int], int]) -> str:
    """`INDEX:PREFIX` items, space-separated: the launcher writes PREFIX and the port at INDEX."""
    return " ".join(f"{position[(p.group, p.word)]}:{p.prefix}" for p in words)


def entries(plan: Plan) -> list[Entry]:
    """deployment.sh's constants and the few lines of code between them, in the order written."""
    nodes = plan.nodes
    e: list[Entry] = [
        Constant("DEPLOYMENT", plan.name),
        Constant(
            "SPEC_SHA256",
            plan.spec_sha256,
            "The spec's sha256: the containers' label sparkc.spec-sha256 and last-launch.txt carry it.",
        ),
        Constant("IMAGE", plan.image),
        Constant("HEAD", plan.head),
        Constant("BACKEND", str(plan.backend)),
        Constant("ENGINE", str(plan.engine_kind)),
        Constant(
            "NODES", tuple(n.name for n in nodes), "Every node, head first; per-node facts are looked up by node name."
        ),
        Constant(
            "TARGET",
            node_map(nodes, "ssh_target"),
            "ssh target per node; empty for the head: the scripts run there and use its docker directly.",
        ),
        Constant("CONTAINER", node_map(nodes, "container_name")),
        Constant("SSH_OPTS", plan.ssh_options, command=True),
        Constant(
            "COMPILED_API_PORT",
            plan.api_port,
            "The API's port as compiled; launch-cluster.sh --port moves it for a launch (last-launch.txt says).",
        ),
        Constant(
            "PROBE_HOST",
            plan.probe_host,
            "Where the scripts reach the API on the head, and (as URLs write them) where to tell the operator.",
        ),
        Constant("PROBE_URL_HOST", plan.probe_url_host),
        Constant("ENDPOINT_HOST", plan.endpoint_host),
        Code(
            'API_PORT=$COMPILED_API_PORT\nPROBE_URL="http://$PROBE_URL_HOST:$API_PORT"\nENDPOINT="http://$ENDPOINT_HOST:$API_PORT"'
        ),
        Constant("SERVED_MODEL", plan.served_model_name),
        Constant(
            "SERVED_MODEL_JSON",
            json.dumps(plan.served_model_name, ensure_ascii=False),
            "The served name as it appears in /v1/models' JSON.",
        ),
        Constant(
            "PROBE_BODY",
            json.dumps({"model": plan.served_model_name, "prompt": "ping", "max_tokens": 1}, ensure_ascii=False),
        ),
        Constant(
            "API_KEY_VAR",
            plan.api_key_variable,
            "The API key the probes send: from the variable named here (a secret), or as the spec gives it.",
        ),
        Constant("API_KEY_GIVEN", plan.api_key_given),
        Constant("RAY_EXPECTED_IPS", plan.ray_expected_ips),
        Constant("TOTAL_GPUS", plan.total_gpus),
    ]
    e += _model(plan)
    e += _launch(plan)
    e += _runs(plan)
    e += _others(plan)
    return e


def _model(plan: Plan) -> list[Entry]:
    m = plan.model
    return [
        Constant("MODEL_HOST_PATH", plan.model_host_path),
        Constant(
            "MODEL_REVISION", m.revision, "The weights' revision, checked on every node where the folder records one."
        ),
        Constant("MODEL_FOLDER", m.folder),
        Constant("MODEL_HF", m.hf),
        Constant(
            "SNAPSHOT_PLACEHOLDER",
            m.snapshot_placeholder,
            "A Hugging Face cache's branch or tag, read from refs/ on the nodes, replaces this word.",
        ),
        Constant("DRAFT_FOLDER", m.draft_folder, "A draft model's folder (speculative decoding); empty: none."),
        Constant(
            "MOUNT_SOURCES",
            plan.mount_sources,
            "container.mounts' host paths: docker would make a missing one an empty folder owned by root.",
        ),
        Constant("DROP_PAGE_CACHE", m.drop_page_cache),
    ]


def _launch(plan: Plan) -> list[Entry]:
    nodes, check, control, gate = plan.nodes, plan.profile_check, plan.api_port_control, plan.start_gate
    e: list[Entry] = [
        Constant("DEFAULT_TIMEOUT", plan.launch_timeout),
        Constant(
            "TIMEOUT_MIN",
            launch_timeout_minimum(),
            "What --timeout takes: the spec's least launch.timeout, and the most the launcher's clock adds up.",
        ),
        Constant("TIMEOUT_MAX", MAX_LAUNCH_TIMEOUT),
        Constant(
            "ENGINE_TIMEOUT_MARGIN",
            plan.engine_timeout_margin,
            "The engine's own start timeout is the launch's less this, so the engine reports its failure first.",
        ),
        Constant("ENGINE_TIMEOUT_VARIABLE", plan.engine_timeout_variable),
        Constant("ENGINE_TIMEOUT_FLAG", plan.engine_timeout_flag),
        Constant("RAY_REQUIRED", plan.ray_required),
        Constant(
            "API_BIND_HOST",
            plan.api_bind_host,
            "Where the engine binds the API: a program listening there (or on every address) takes its port.",
        ),
        Constant("RAY_PORT", plan.ray_port),
        Constant(
            "PROFILE_NAME",
            plan.profile or "none",
            "What the image's profile says docker will report; checked before anything starts.",
        ),
        Constant("EXPECTED_ENTRYPOINT", check.entrypoint_json),
        Constant("PROFILE_MISMATCH_FATAL", check.fatal),
        Constant("PROFILE_ENV_DEFAULTS", check.env_defaults),
        Constant(
            "ENTRYPOINT_PATH",
            check.entrypoint_path,
            "The entrypoint's file and its sha256 as the profile recorded them (empty: not recorded, or bypassed).",
        ),
        Constant("ENTRYPOINT_SHA256", check.entrypoint_sha256),
        Constant(
            "SECRETS",
            plan.secrets,
            "Variables passed to the containers by name only; their values come from the environment.",
        ),
        Constant(
            "RESERVED_NAMES",
            tuple(sorted(SHELL_NAMES | SCRIPT_NAMES)),
            "--env 'NAME=VALUE' refuses these names (the shell's and these scripts' own) and secret-looking ones.",
            packed=True,
        ),
        Constant("SECRET_NAME_PATTERN", SECRET_NAME.pattern),
        Constant(
            "HEAD_FABRIC_IP",
            plan.head_fabric_ip,
            "Each node's fabric side: every rendezvous, NCCL, Gloo and Ray address is on it.",
        ),
        Constant(
            "NETDEV",
            node_map(nodes, "checked_netdev"),
            "Empty: one node without a fabric (loopback), whose link the preflight does not check.",
        ),
        Constant("FABRIC_IP", node_map(nodes, "fabric_ip")),
        Constant(
            "FABRIC_TARGET",
            node_map(nodes, "fabric_target"),
            "Where distribute.sh's copies go: each node's fabric address, never its management one.",
        ),
        Constant("HAS_RDMA", node_map(nodes, "has_rdma")),
        Constant("GPUS", node_map(nodes, "gpus")),
        Constant(
            "MEMORY_ROOM",
            node_map(nodes, "memory_room"),
            "Bytes of each node's memory for engines: the deployments there (label sparkc.memory-budget) fit in it.",
        ),
        Constant(
            "START_GATE_PPM",
            gate.ppm if gate else 0,
            "The engine's start check: PPM millionths of MemTotal free once its init took OVERHEAD_KB (0: none).",
        ),
        Constant("START_GATE_FRACTION", gate.fraction if gate else ""),
        Constant("START_GATE_OVERHEAD_KB", gate.overhead_kb if gate else 0),
        Constant("START_GATE_ENGINE", gate.engine if gate else ""),
        Constant("START_GATE_SOURCE", gate.source if gate else ""),
        Constant(
            "HCAS",
            {n.name: " ".join(n.hcas) for n in nodes},
            "Each node's RDMA devices, space-separated, as NCCL_IB_HCA takes them.",
        ),
    ]
    if any(n.planes for n in nodes):
        e += [
            Constant(
                "CONTROL_NETDEV",
                node_map(nodes, "control_netdev"),
                "Where the spec splits the planes: each node's control netdev and IP, and its data netdevs.",
            ),
            Constant("CONTROL_IP", node_map(nodes, "control_ip")),
            Constant("DATA_NETDEVS", node_map(nodes, "data_netdevs_words")),
        ]
    e += [
        Constant("NCCL_CHECK", plan.nccl_check),
        Constant(
            "NCCL_WANT",
            {n.name: str(n.nccl_transport) for n in nodes},
            "The transport NCCL must report in each node's log (IB where RDMA devices are listed); empty: not checked.",
        ),
        Constant(
            "HEAD_PORTS",
            tuple(str(p.port) for p in plan.head_ports),
            "Ports the head must have free before anything starts, and what each is for.",
        ),
        Constant("HEAD_PORT_USES", tuple(p.what for p in plan.head_ports)),
        Constant(
            "API_PORT_FLAG",
            control.flag,
            "How --port reaches the engine: this flag, or this variable; neither: the image decides, for this reason.",
        ),
        Constant("API_PORT_VARIABLE", control.variable),
        Constant("API_PORT_FIXED", control.fixed),
        Constant(
            "API_PORT_TAKEN",
            tuple(str(p.port) for p in control.taken),
            "Ports --port may not take: the head's others, and what each is for.",
        ),
        Constant("API_PORT_TAKEN_BY", tuple(p.what for p in control.taken)),
        Constant(
            "START_WAVES", tuple(" ".join(w) for w in plan.start_waves), "Containers started together, wave after wave."
        ),
        Constant(
            "ENGINE_COMMAND",
            plan.ray_engine,
            "The engine, run in the head's container once Ray or mpirun reach every node; empty: the containers' own.",
            command=True,
        ),
        Constant(
            "ENGINE_API_PORT_AT",
            _port_places(plan.engine_api_port_words, _positions(plan.ray_engine)),
            "Where ENGINE_COMMAND carries the API's port: INDEX:PREFIX words --port rewrites.",
        ),
    ]
    if plan.engine_files:
        e += [
            Constant(
                "BUILD_PLACEHOLDER",
                BUILD_PLACEHOLDER,
                "The engine's files here: a -v source starting with this word; the word for the library's sshd script.",
            ),
            Constant("MPI_SSHD_PLACEHOLDER", MPI_SSHD_PLACEHOLDER),
        ]
    if plan.mpi_ssh_port:
        e += [
            Constant("MPI_SSH_PORT", plan.mpi_ssh_port, "backend mpi: sshd's port in every container."),
            Constant(
                "MPI_SSHD_FROM_HOOKS",
                plan.mpi_sshd_from_hooks,
                "Whether a pre_engine hook installs sshd: then an image without it is only noted.",
            ),
            Constant(
                "MPI_HOST", node_map(nodes, "control_ip"), "Where the head's container (mpirun) reaches each node."
            ),
            Constant("RANK", node_map(nodes, "rank")),
        ]
    return e


def launch_timeout_minimum() -> int:
    from compiler.spec.schema import load_schema  # here: only a render reads the schema for it

    minimum = load_schema()["properties"]["launch"]["properties"]["timeout"]["minimum"]
    assert isinstance(minimum, int)
    return minimum


def _positions(command: Command) -> dict[tuple[int, int], int]:
    """(group, word) of `command` to its index among the command's words."""
    at, i = {}, 0
    for g, group in enumerate(command):
        for w in range(len(group)):
            at[(g, w)] = i
            i += 1
    return at


def _runs(plan: Plan) -> list[Entry]:
    """The containers' and the probes' `docker run` words: what every node's has once, then each node's own."""
    nodes = plan.nodes
    runs = split_runs((n.docker_run for n in nodes), plan.image)
    e: list[Entry] = [
        Constant(
            "PROBE",
            plan.probe,
            "The fabric probe before the engine starts: one all-reduce across the nodes (--no-probe turns it off).",
            mutable=True,
        ),
        Constant("PROBE_PORT", plan.probe_port),
        Constant("PROBE_TIMEOUT", plan.probe_timeout),
        Constant(
            "DOCKER_RUN_SHARED",
            runs.shared,
            "Each node's container: `docker run` with these words, then the node's own below, as executed.",
            command=True,
            by_name=True,
        ),
        _sections("DOCKER_RUN_NODES", runs.own, [_describe(n) for n in nodes]),
        Constant(
            "DOCKER_RUN_AT",
            dict(zip((n.name for n in nodes), runs.spans, strict=True)),
            "Where each node's words start in DOCKER_RUN_NODES, and how many they are.",
            by_name=True,
        ),
        Constant(
            "API_PORT_AT",
            {
                n.name: _port_places(n.api_port_words, _run_positions(runs, i, n.docker_run))
                for i, n in enumerate(nodes)
            },
            "Where each node's words carry the API's port: INDEX:PREFIX items, the words --port rewrites.",
        ),
    ]
    if plan.probe:
        e += _probe(plan, runs)
    return e


def _run_positions(runs: SplitRuns, node: int, command: Command) -> dict[tuple[int, int], int]:
    return {(g, w): runs.position(node, g, w) for g, group in enumerate(command) for w in range(len(group))}


def _describe(n: NodePlan) -> str:
    rdma = f", RDMA {','.join(n.hcas)}" if n.hcas else ", no RDMA"
    return f"{n.name}: {n.role} rank {n.rank}, fabric {n.fabric_ip} on {n.netdev}{rdma}, {n.gpus} GPU(s)"


def _sections(name: str, own: Iterable[Command], notes: list[str], why: str = "") -> Constant:
    """Each node's own groups one after another, a note before its first group."""
    groups: list[tuple[str, ...]] = []
    at: dict[int, str] = {}
    for note, command in zip(notes, own, strict=True):
        at[len(groups)] = note
        groups += command
    return Constant(name, tuple(groups), why, command=True, by_name=True, notes=at)


def _probe(plan: Plan, runs: SplitRuns) -> list[Entry]:
    """The probe's words, from the container's: DOCKER_RUN_SHARED less the words at PROBE_RUN_SKIP, then what
    every probe adds (PROBE_RUN_SHARED), then each node's own."""
    shared = list(runs.shared)
    probes = [list(n.probe_run) for n in plan.nodes]
    kept = [g for g in shared if all(g in p for p in probes)]
    skip: list[int] = []
    i = 0
    for group in shared:
        if group not in kept:
            skip += range(i, i + len(group))
        i += len(group)
    extras = [[g for g in p if g not in kept] for p in probes]
    image = (plan.image,)
    options = [x[: x.index(image)] for x in extras]
    common = [g for g in options[0] if all(g in o for o in options[1:])]
    own = [tuple(g for g in x if g not in common) for x in extras]
    spans, start = {}, 0
    for n, groups in zip(plan.nodes, own, strict=True):
        count = sum(len(g) for g in groups)
        spans[n.name] = f"{start} {count}"
        start += count
    places: dict[str, str | int | bool] = {}
    for n, groups in zip(plan.nodes, own, strict=True):
        run = [*kept, *common, *groups]  # as compiled_run joins them
        starts = [sum(len(g) for g in run[:k]) for k in range(len(run))]
        at = {(i, w): starts[run.index(g)] + w for i, g in enumerate(n.probe_run) for w in range(len(g))}
        places[n.name] = _port_places(n.probe_api_port_words, at)
    return [
        Constant(
            "PROBE_RUN_SKIP",
            " ".join(map(str, skip)),
            "Each node's probe: DOCKER_RUN_SHARED less the words at these indices, those below, python3 -c PROGRAM.",
        ),
        Constant("PROBE_RUN_SHARED", tuple(common), command=True, by_name=True),
        _sections("PROBE_RUN_NODES", own, [n.name for n in plan.nodes]),
        Constant(
            "PROBE_RUN_AT",
            spans,
            "Where each node's words start in PROBE_RUN_NODES, and how many they are.",
            by_name=True,
        ),
        Constant("PROBE_API_PORT_AT", places, "Where each node's probe words carry the API's port, as API_PORT_AT."),
    ]


def _others(plan: Plan) -> list[Entry]:
    nodes = plan.nodes
    e: list[Entry] = [
        Constant(
            "HAS_PLANES",
            any(n.planes for n in nodes),
            "Where the spec splits the planes (cluster.nodes[].control), the preflight checks them too.",
        ),
        Constant(
            "IS_RING",
            plan.topology.value == "ring",
            "A ring: the preflight checks that each node reaches the one before it over a cable.",
        ),
        Constant(
            "HAS_FABRIC_ADDRESSES",
            any(n.fabric_addresses for n in nodes),
            "cluster.nodes[].fabric.addresses: the preflight checks each netdev carries its address.",
        ),
    ]
    if any(n.fabric_addresses for n in nodes):
        e.append(
            Constant("FABRIC_ADDRESSES", {n.name: " ".join(" ".join(a) for a in n.fabric_addresses) for n in nodes})
        )
    e.append(
        Constant(
            "SWITCHLESS",
            plan.topology.value in ("mesh", "ring"),
            "A mesh or a ring: the probe refuses an NCCL too old to route each peer over its own cable.",
        )
    )
    if plan.hooks:
        hooks = plan.hooks
        why = f"container.hooks: pre_engine {len(hooks.pre_engine)} command(s), sha256 {hooks.pre_engine_sha256}"
        e.append(Constant("HAS_HOOKS", True, comment(why)))
        e += [Code(f"# patch {comment(f.path)} sha256 {comment(f.sha256)}") for f in hooks.patches]
        e += [
            Constant("HAS_PATCHES", bool(hooks.patches)),
            Constant("PATCHES_DIR", PATCHES_DIR),
            Constant("PATCHES_PLACEHOLDER", PATCHES_PLACEHOLDER),
        ]
    else:
        e.append(Constant("HAS_HOOKS", False))
    host = plan.host_hooks
    if host:
        where = ", ".join(host.nodes)
        why = f"cluster.hooks: sh -c on each host ({where}) first, as {host.runs_as}; sha256 {host.sha256}"
        e += [Constant("HOST_HOOKS", host.pre_launch, comment(why)), Constant("HOST_HOOKS_SUDO", host.sudo)]
    else:
        e += [Constant("HOST_HOOKS", ()), Constant("HOST_HOOKS_SUDO", False)]
    if plan.fetch:
        f = plan.fetch
        mode = "a Hugging Face cache" if f.mode == "cache" else "the weights' folder itself"
        e += [
            Constant("FETCH_REPO", f.repo, f"What fetch-model.sh downloads and where: {f.mode} mode ({mode})."),
            Constant("FETCH_REVISION", f.revision),
            Constant("FETCH_TARGET", f.target),
            Constant("FETCH_MODE", str(f.mode)),
            Constant("FETCH_CONTAINER", f.container_name),
        ]
    if plan.bench:
        b = plan.bench
        e += [
            Constant(
                "BENCH_COMMAND",
                b.command,
                "The engine's serving benchmark; bench.sh fills in its @...@ words for each concurrency.",
            ),
            Constant("BENCH_MOUNTS", b.mounts, command=True),
            Constant("BENCH_ENV", b.env, command=True),
            Constant("BENCH_TOKENIZER", b.tokenizer),
            Constant("BENCH_SNAPSHOT_REF", b.snapshot_ref),
            Constant("BENCH_SNAPSHOT_PLACEHOLDER", plan.model.snapshot_placeholder),
            Constant("BENCH_CONCURRENCIES", ",".join(map(str, b.concurrencies))),
            Constant("BENCH_INPUT_LEN", b.input_len),
            Constant("BENCH_OUTPUT_LEN", b.output_len),
            Constant("BENCH_CONTAINER", b.container_name),
            Constant("BENCH_RESULTS", BENCH_RESULTS),
        ]
    if plan.service:
        e += [
            Constant(
                "SERVICE_UNIT",
                plan.service.unit,
                "The systemd unit beside the scripts, and where install-service.sh links this folder.",
            ),
            Constant("SERVICE_FOLDER", plan.service.folder),
        ]
    return e


__all__ = ["DEPLOYMENT", "Constant", "render_constants"]
