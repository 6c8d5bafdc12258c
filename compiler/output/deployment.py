"""deployment.sh's constants: every value of one deployment the scripts read, built from the plan.

Each entry script (launch-cluster.sh, status.sh, ...) finds its folder, sources deployment.sh beside it and
calls its main: the values live there once, the code in lib/. templates/deployment.sh.j2 frames them (the
header, then the checked load of the library). A constant is a name, a typed value and a line that says
why; `render_constants` writes them all the same way (quoted by compiler/output/bash_words.py), so no
template keeps a list of the constants it needs.
"""

from __future__ import annotations

import json

from compiler.names import RESERVED_PREFIXES, SECRET_NAME, SHELL_NAMES
from compiler.output.bash_constants import Code, Constant, Entry, assignment, node_map, port_places, positions
from compiler.output.bash_words import comment
from compiler.output.deployment_runs import runs
from compiler.plan import (
    BENCH_RESULTS,
    BUILD_PLACEHOLDER,
    BUILT_IMAGE_RECORD,
    HOME_PLACEHOLDER,
    MAX_LAUNCH_TIMEOUT,
    MPI_SSHD_PLACEHOLDER,
    PATCHES_DIR,
    PATCHES_PLACEHOLDER,
    Plan,
)

DEPLOYMENT = "deployment.sh"


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
        out.append(assignment(entry, placeholder))
    return "\n".join(out)


def entries(plan: Plan) -> list[Entry]:
    """deployment.sh's constants and the few lines of code between them, in the order written."""
    nodes = plan.nodes
    e: list[Entry] = [
        Constant("SPARKC_DEPLOYMENT", plan.name),
        Constant(
            "SPARKC_SPEC_SHA256",
            plan.spec_sha256,
            "The spec's sha256: the containers' label sparkc.spec-sha256 and last-launch.txt carry it.",
        ),
        Constant("SPARKC_IMAGE", plan.image),
        Constant("SPARKC_HEAD", plan.head),
        Constant("SPARKC_BACKEND", str(plan.backend)),
        Constant("SPARKC_ENGINE", str(plan.engine_kind)),
        Constant(
            "SPARKC_NODES",
            tuple(n.name for n in nodes),
            "Every node, head first; per-node facts are looked up by node name.",
        ),
        Constant(
            "SPARKC_TARGET",
            node_map(nodes, "ssh_target"),
            "ssh target per node; empty for the head: the scripts run there and use its docker directly.",
        ),
        Constant("SPARKC_CONTAINER", node_map(nodes, "container_name")),
        Constant("SPARKC_SSH_OPTS", plan.ssh_options, command=True),
        Constant(
            "SPARKC_COMPILED_API_PORT",
            plan.api_port,
            "The API's port as compiled; launch-cluster.sh --port moves it for a launch (last-launch.txt says).",
        ),
        Constant(
            "SPARKC_PROBE_HOST",
            plan.probe_host,
            "Where the scripts reach the API on the head, and (as URLs write them) where to tell the operator.",
        ),
        Constant("SPARKC_PROBE_URL_HOST", plan.probe_url_host),
        Constant("SPARKC_ENDPOINT_HOST", plan.endpoint_host),
        Code(
            'SPARKC_API_PORT=$SPARKC_COMPILED_API_PORT\nSPARKC_PROBE_URL="http://$SPARKC_PROBE_URL_HOST:$SPARKC_API_PORT"\nSPARKC_ENDPOINT="http://$SPARKC_ENDPOINT_HOST:$SPARKC_API_PORT"'
        ),
        Constant("SPARKC_SERVED_MODEL", plan.served_model_name),
        Constant(
            "SPARKC_SERVED_MODEL_JSON",
            json.dumps(plan.served_model_name, ensure_ascii=False),
            "The served name as it appears in /v1/models' JSON.",
        ),
        Constant(
            "SPARKC_PROBE_BODY",
            json.dumps({"model": plan.served_model_name, "prompt": "ping", "max_tokens": 1}, ensure_ascii=False),
        ),
        Constant(
            "SPARKC_API_KEY_VAR",
            plan.api_key_variable,
            "The API key the probes send: from the variable named here (a secret), or as the spec gives it.",
        ),
        Constant("SPARKC_API_KEY_GIVEN", plan.api_key_given),
        Constant("SPARKC_RAY_EXPECTED_IPS", plan.ray_expected_ips),
        Constant("SPARKC_TOTAL_GPUS", plan.total_gpus),
    ]
    e += _metrics(plan)
    e += _model(plan)
    e += _launch(plan)
    e += runs(plan)
    e += _others(plan)
    return e


def _metrics(plan: Plan) -> list[Entry]:
    """status.sh: the engine's Prometheus samples by name (empty names where it serves none)."""
    m = plan.metrics
    return [
        Constant(
            "SPARKC_METRICS_RUNNING",
            m.running if m else "",
            "The engine's samples status.sh reads on /metrics: requests running, waiting, the KV cache's share in"
            " use (the first name present), prompt and generated tokens.",
        ),
        Constant("SPARKC_METRICS_WAITING", m.waiting if m else ""),
        Constant("SPARKC_METRICS_KV_USAGE", m.kv_usage if m else ()),
        Constant("SPARKC_METRICS_PROMPT_TOKENS", m.prompt_tokens if m else ""),
        Constant("SPARKC_METRICS_GENERATION_TOKENS", m.generation_tokens if m else ""),
        Constant("SPARKC_METRICS_NOTE", m.note if m else plan.metrics_absent),
    ]


def _model(plan: Plan) -> list[Entry]:
    m = plan.model
    return [
        Constant("SPARKC_MODEL_HOST_PATH", plan.model_host_path),
        Constant(
            "SPARKC_MODEL_REVISION",
            m.revision,
            "The weights' revision, checked on every node where the folder records one.",
        ),
        Constant("SPARKC_MODEL_FOLDER", m.folder),
        Constant("SPARKC_MODEL_HF", m.hf),
        Constant(
            "SPARKC_SNAPSHOT_PLACEHOLDER",
            m.snapshot_placeholder,
            "A Hugging Face cache's branch or tag, read from refs/ on the nodes, replaces this word.",
        ),
        Constant("SPARKC_DRAFT_FOLDER", m.draft_folder, "A draft model's folder (speculative decoding); empty: none."),
        Constant(
            "SPARKC_MOUNT_SOURCES",
            plan.mount_sources,
            "container.mounts' host paths: docker would make a missing one an empty folder owned by root.",
        ),
        Constant(
            "SPARKC_HOME_PLACEHOLDER",
            HOME_PLACEHOLDER if plan.home_mounts else "",
            "A mount's host path under ~/: the launcher asks each node for its ssh user's home; empty: none.",
        ),
        Constant("SPARKC_DROP_PAGE_CACHE", m.drop_page_cache),
    ]


def _launch(plan: Plan) -> list[Entry]:
    nodes, check, control, gate = plan.nodes, plan.profile_check, plan.api_port_control, plan.start_gate
    e: list[Entry] = [
        Constant("SPARKC_DEFAULT_TIMEOUT", plan.launch_timeout),
        Constant(
            "SPARKC_TIMEOUT_MIN",
            launch_timeout_minimum(),
            "What --timeout takes: the spec's least launch.timeout, and the most the launcher's clock adds up.",
        ),
        Constant("SPARKC_TIMEOUT_MAX", MAX_LAUNCH_TIMEOUT),
        Constant(
            "SPARKC_ENGINE_TIMEOUT_MARGIN",
            plan.engine_timeout_margin,
            "The engine's own start timeout is the launch's less this, so the engine reports its failure first.",
        ),
        Constant("SPARKC_ENGINE_TIMEOUT_VARIABLE", plan.engine_timeout_variable),
        Constant("SPARKC_ENGINE_TIMEOUT_FLAG", plan.engine_timeout_flag),
        Constant("SPARKC_RAY_REQUIRED", plan.ray_required),
        Constant(
            "SPARKC_API_BIND_HOST",
            plan.api_bind_host,
            "Where the engine binds the API: a program listening there (or on every address) takes its port.",
        ),
        Constant("SPARKC_RAY_PORT", plan.ray_port),
        Constant(
            "SPARKC_PROFILE_NAME",
            plan.profile or "none",
            "What the image's profile says docker will report; checked before anything starts.",
        ),
        Constant("SPARKC_EXPECTED_ENTRYPOINT", check.entrypoint_json),
        Constant("SPARKC_PROFILE_MISMATCH_FATAL", check.fatal),
        Constant("SPARKC_PROFILE_ENV_DEFAULTS", check.env_defaults),
        Constant(
            "SPARKC_ENTRYPOINT_PATH",
            check.entrypoint_path,
            "The entrypoint's file and its sha256 as the profile recorded them (empty: not recorded, or bypassed).",
        ),
        Constant("SPARKC_ENTRYPOINT_SHA256", check.entrypoint_sha256),
        Constant(
            "SPARKC_SECRETS",
            plan.secrets,
            "Variables passed to the containers by name only; their values come from the environment.",
        ),
        Constant(
            "SPARKC_RESERVED_NAMES",
            tuple(sorted(n for n in SHELL_NAMES if not n.startswith(RESERVED_PREFIXES))),
            "--env 'NAME=VALUE' refuses these names (the shell's own), any starting with SPARKC_, BASH_ or LC_, and"
            " secret-looking ones.",
            packed=True,
        ),
        Constant("SPARKC_SECRET_NAME_PATTERN", SECRET_NAME.pattern),
        Constant(
            "SPARKC_HEAD_FABRIC_IP",
            plan.head_fabric_ip,
            "Each node's fabric side: every rendezvous, NCCL, Gloo and Ray address is on it.",
        ),
        Constant(
            "SPARKC_NETDEV",
            node_map(nodes, "checked_netdev"),
            "Empty: one node without a fabric (loopback), whose link the preflight does not check.",
        ),
        Constant("SPARKC_FABRIC_IP", node_map(nodes, "fabric_ip")),
        Constant(
            "SPARKC_FABRIC_TARGET",
            node_map(nodes, "fabric_target"),
            "Where distribute.sh's copies go: each node's fabric address, never its management one.",
        ),
        Constant(
            "SPARKC_COPY_FROM",
            {r.node: r.source for r in plan.copy_routes},
            "distribute.sh's routes: each worker receives from this node (the head, or a neighbour that passes the"
            " copy on) ...",
        ),
        Constant("SPARKC_COPY_VIA", {r.node: " ".join(r.targets) for r in plan.copy_routes}, "... over these ways"),
        Constant(
            "SPARKC_COPY_CABLED",
            {r.node: r.cabled for r in plan.copy_routes},
            "0: no cable path reaches the node, so its copies take the control network (distribute.sh says so).",
        ),
        Constant("SPARKC_HAS_RDMA", node_map(nodes, "has_rdma")),
        Constant("SPARKC_GPUS", node_map(nodes, "gpus")),
        Constant(
            "SPARKC_MEMORY_ROOM",
            node_map(nodes, "memory_room"),
            "Bytes of each node's memory for engines: the deployments there (label sparkc.memory-budget) fit in it.",
        ),
        Constant(
            "SPARKC_START_GATE_PPM",
            gate.ppm if gate else 0,
            "The engine's start check: PPM millionths of MemTotal free once its init took OVERHEAD_KB (0: none).",
        ),
        Constant("SPARKC_START_GATE_FRACTION", gate.fraction if gate else ""),
        Constant("SPARKC_START_GATE_OVERHEAD_KB", gate.overhead_kb if gate else 0),
        Constant("SPARKC_START_GATE_ENGINE", gate.engine if gate else ""),
        Constant("SPARKC_START_GATE_SOURCE", gate.source if gate else ""),
        Constant(
            "SPARKC_HCAS",
            {n.name: " ".join(n.hcas) for n in nodes},
            "Each node's RDMA devices, space-separated, as NCCL_IB_HCA takes them.",
        ),
    ]
    if any(n.planes for n in nodes):
        e += [
            Constant(
                "SPARKC_CONTROL_NETDEV",
                node_map(nodes, "control_netdev"),
                "Where the spec splits the planes: each node's control netdev and IP, and its data netdevs.",
            ),
            Constant("SPARKC_CONTROL_IP", node_map(nodes, "control_ip")),
            Constant("SPARKC_DATA_NETDEVS", node_map(nodes, "data_netdevs_words")),
        ]
    e += [
        Constant("SPARKC_NCCL_CHECK", plan.nccl_check),
        Constant(
            "SPARKC_NCCL_WANT",
            {n.name: str(n.nccl_transport) for n in nodes},
            "The transport NCCL must report in each node's log (IB where RDMA devices are listed); empty: not checked.",
        ),
        Constant(
            "SPARKC_HEAD_PORTS",
            tuple(str(p.port) for p in plan.head_ports),
            "Ports the head must have free before anything starts, and what each is for.",
        ),
        Constant("SPARKC_HEAD_PORT_USES", tuple(p.what for p in plan.head_ports)),
        Constant(
            "SPARKC_API_PORT_FLAG",
            control.flag,
            "How --port reaches the engine: this flag, or this variable; neither: the image decides, for this reason.",
        ),
        Constant("SPARKC_API_PORT_VARIABLE", control.variable),
        Constant("SPARKC_API_PORT_FIXED", control.fixed),
        Constant(
            "SPARKC_API_PORT_TAKEN",
            tuple(str(p.port) for p in control.taken),
            "Ports --port may not take: the head's others, and what each is for.",
        ),
        Constant("SPARKC_API_PORT_TAKEN_BY", tuple(p.what for p in control.taken)),
        Constant(
            "SPARKC_START_WAVES",
            tuple(" ".join(w) for w in plan.start_waves),
            "Containers started together, wave after wave.",
        ),
        Constant(
            "SPARKC_ENGINE_COMMAND",
            plan.ray_engine,
            "The engine, run in the head's container once Ray or mpirun reach every node; empty: the containers' own.",
            command=True,
        ),
        Constant(
            "SPARKC_ENGINE_API_PORT_AT",
            port_places(plan.engine_api_port_words, positions(plan.ray_engine)),
            "Where SPARKC_ENGINE_COMMAND carries the API's port: INDEX:PREFIX words --port rewrites.",
        ),
    ]
    if plan.engine_files:
        e += [
            Constant(
                "SPARKC_BUILD_PLACEHOLDER",
                BUILD_PLACEHOLDER,
                "The engine's files here: a -v source starting with this word; the word for the library's sshd script.",
            ),
            Constant("SPARKC_MPI_SSHD_PLACEHOLDER", MPI_SSHD_PLACEHOLDER),
        ]
    if plan.mpi_ssh_port:
        e += [
            Constant("SPARKC_MPI_SSH_PORT", plan.mpi_ssh_port, "backend mpi: sshd's port in every container."),
            Constant(
                "SPARKC_MPI_SSHD_FROM_HOOKS",
                plan.mpi_sshd_from_hooks,
                "Whether a pre_engine hook installs sshd: then an image without it is only noted.",
            ),
            Constant(
                "SPARKC_MPI_HOST",
                node_map(nodes, "control_ip"),
                "Where the head's container (mpirun) reaches each node.",
            ),
            Constant("SPARKC_RANK", node_map(nodes, "rank")),
        ]
    return e


def launch_timeout_minimum() -> int:
    from compiler.spec.schema import load_schema  # here: only a render reads the schema for it

    minimum = load_schema()["properties"]["launch"]["properties"]["timeout"]["minimum"]
    assert isinstance(minimum, int)
    return minimum


def _others(plan: Plan) -> list[Entry]:
    nodes = plan.nodes
    e: list[Entry] = [
        Constant(
            "SPARKC_HAS_PLANES",
            any(n.planes for n in nodes),
            "Where the spec splits the planes (cluster.nodes[].control), the preflight checks them too.",
        ),
        Constant(
            "SPARKC_IS_RING",
            plan.topology.value == "ring",
            "A ring: the preflight checks that each node reaches the one before it over a cable.",
        ),
        Constant(
            "SPARKC_HAS_FABRIC_ADDRESSES",
            any(n.fabric_addresses for n in nodes),
            "cluster.nodes[].fabric.addresses: the preflight checks each netdev carries its address.",
        ),
    ]
    if any(n.fabric_addresses for n in nodes):
        e.append(
            Constant(
                "SPARKC_FABRIC_ADDRESSES", {n.name: " ".join(" ".join(a) for a in n.fabric_addresses) for n in nodes}
            )
        )
    e.append(
        Constant(
            "SPARKC_SWITCHLESS",
            plan.topology.value in ("mesh", "ring"),
            "A mesh or a ring: the probe refuses an NCCL too old to route each peer over its own cable.",
        )
    )
    if plan.hooks:
        hooks = plan.hooks
        why = f"container.hooks: pre_engine {len(hooks.pre_engine)} command(s), sha256 {hooks.pre_engine_sha256}"
        e.append(Constant("SPARKC_HAS_HOOKS", True, comment(why)))
        e += [Code(f"# patch {comment(f.path)} sha256 {comment(f.sha256)}") for f in hooks.patches]
        e += [
            Constant("SPARKC_HAS_PATCHES", bool(hooks.patches)),
            Constant("SPARKC_PATCHES_DIR", PATCHES_DIR),
            Constant("SPARKC_PATCHES_PLACEHOLDER", PATCHES_PLACEHOLDER),
        ]
    else:
        e.append(Constant("SPARKC_HAS_HOOKS", False))
    host = plan.host_hooks
    if host:
        where = ", ".join(host.nodes)
        why = f"cluster.hooks: sh -c on each host ({where}) first, as {host.runs_as}; sha256 {host.sha256}"
        e += [
            Constant("SPARKC_HOST_HOOKS", host.pre_launch, comment(why)),
            Constant("SPARKC_HOST_HOOKS_SUDO", host.sudo),
        ]
    else:
        e += [Constant("SPARKC_HOST_HOOKS", ()), Constant("SPARKC_HOST_HOOKS_SUDO", False)]
    if plan.fetch:
        f = plan.fetch
        mode = "a Hugging Face cache" if f.mode == "cache" else "the weights' folder itself"
        e += [
            Constant("SPARKC_FETCH_REPO", f.repo, f"What fetch-model.sh downloads and where: {f.mode} mode ({mode})."),
            Constant("SPARKC_FETCH_REVISION", f.revision),
            Constant("SPARKC_FETCH_TARGET", f.target),
            Constant("SPARKC_FETCH_MODE", str(f.mode)),
            Constant("SPARKC_FETCH_CONTAINER", f.container_name),
            Constant(
                "SPARKC_FETCH_DRAFT_REPO",
                f.draft_repo,
                "The draft model, downloaded after the model into its own folder (empty: no draft repo).",
            ),
            Constant("SPARKC_FETCH_DRAFT_TARGET", f.draft_target),
        ]
    if plan.build:
        e += [
            Constant(
                "SPARKC_BUILD_CONTEXT",
                plan.build.context,
                "container.build: build-image.sh builds SPARKC_IMAGE on the head from this folder and Dockerfile.",
            ),
            Constant("SPARKC_BUILD_DOCKERFILE", plan.build.dockerfile),
            Constant("SPARKC_BUILD_ARGS", plan.build.args, "One --build-arg NAME=VALUE each."),
            Constant("SPARKC_BUILT_IMAGE_RECORD", BUILT_IMAGE_RECORD),
        ]
    if plan.bench:
        b = plan.bench
        e += [
            Constant(
                "SPARKC_BENCH_COMMAND",
                b.command,
                "The engine's serving benchmark; bench.sh fills in its @...@ words for each concurrency.",
            ),
            Constant("SPARKC_BENCH_MOUNTS", b.mounts, command=True),
            Constant("SPARKC_BENCH_ENV", b.env, command=True),
            Constant("SPARKC_BENCH_TOKENIZER", b.tokenizer),
            Constant("SPARKC_BENCH_SNAPSHOT_REF", b.snapshot_ref),
            Constant("SPARKC_BENCH_SNAPSHOT_PLACEHOLDER", plan.model.snapshot_placeholder),
            Constant("SPARKC_BENCH_CONCURRENCIES", ",".join(map(str, b.concurrencies))),
            Constant("SPARKC_BENCH_INPUT_LEN", b.input_len),
            Constant("SPARKC_BENCH_OUTPUT_LEN", b.output_len),
            Constant("SPARKC_BENCH_CONTAINER", b.container_name),
            Constant("SPARKC_BENCH_RESULTS", BENCH_RESULTS),
        ]
    if plan.service:
        e += [
            Constant(
                "SPARKC_SERVICE_UNIT",
                plan.service.unit,
                "The systemd unit beside the scripts, and where install-service.sh links this folder.",
            ),
            Constant("SPARKC_SERVICE_FOLDER", plan.service.folder),
            Constant("SPARKC_WATCH_UNIT", plan.service.watch_unit, "The unit that runs watch.sh, after the one above."),
        ]
    why = "watch.on_failure: run on the head by sh -c when watch.sh finds a failure (empty: none)."
    e.append(Constant("SPARKC_WATCH_ON_FAILURE", plan.watch_on_failure, why))
    return e


__all__ = ["DEPLOYMENT", "Constant", "render_constants"]
