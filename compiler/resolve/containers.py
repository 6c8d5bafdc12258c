"""Each node's `docker run`, and what runs in it: `ray start`, or the engine through the image's entrypoint."""

from __future__ import annotations

from compiler.engines import EngineArgv, host_port
from compiler.engines.speculative import describe
from compiler.engines.trtllm import FILES_DIR, FILES_MOUNT, HOSTFILE
from compiler.plan import (
    BUILD_PLACEHOLDER,
    MPI_SSHD_PLACEHOLDER,
    BenchPlan,
    BuildPlan,
    Command,
    FetchMode,
    FetchPlan,
    HeadPort,
    MemoryBudget,
    ModelPlan,
    Setting,
    Words,
    flat,
)
from compiler.resolve.cache import cache_mount
from compiler.resolve.context import Deployment
from compiler.resolve.hooks import patches_mount, with_hooks
from compiler.spec.profiles import ArgsStyle
from compiler.spec.typed import Backend, EntrypointMode, Node

# Where a branch or tag's commit goes in a `docker run` word; the launcher reads it from refs/ on the nodes.
SNAPSHOT_PLACEHOLDER = "@SPARKC_SNAPSHOT@"
# Pinned memory for RDMA, many open files (weights shards, sockets), a deep stack: as every launcher sets.
DEFAULT_ULIMITS = {"memlock": "-1", "nofile": "1048576", "stack": "67108864"}


def container_name(d: Deployment, node: Node) -> str:
    return f"sparkc-{d.spec.name}-{node.name}"


def docker_run(d: Deployment, node: Node, rank: int, env: tuple[Setting, ...], shares: tuple[str, ...] = ()) -> Command:
    """`shares`: the labels that say what the container takes of its node (share_labels). The label
    sparkc.spec-sha256 is not among these words: the launcher adds it from deployment.sh's SPEC_SHA256."""
    labels = (f"sparkc.deployment={d.spec.name}", f"sparkc.node={node.name}", *shares)
    # No --rm (a crash must leave its logs) and no restart policy (ranks must start in order).
    groups: list[Words] = [("docker", "run"), ("-d",), ("--name", container_name(d, node))]
    groups += [("--label", label) for label in labels]
    groups += _options(d, node, env)
    groups += patches_mount(d)  # the engine's container only: the probe runs no hooks
    if rank == 0 and d.engine.build_files(d):
        # The engine's files from the build folder, which lies on the head only.
        groups.append(("-v", f"{BUILD_PLACEHOLDER}/{FILES_DIR}:{FILES_MOUNT}:ro"))
    # Secrets by name only: docker takes the value from its client's environment, never from the argv.
    groups += [("-e", name) for name in d.spec.container.secrets]
    if d.backend is Backend.RAY:
        entry_override, command = _ray_start(d, node, rank)
    elif d.backend is Backend.MPI:
        entry_override, command = _mpi_sshd(d, node)
    else:
        entry_override, command = _engine_command(d, rank)
    entry_override, command = with_hooks(d, entry_override, command)
    if entry_override:
        groups.append(("--entrypoint", entry_override))
    return (*groups, (d.spec.container.image,), *command)


def share_labels(d: Deployment, node: Node, budget: MemoryBudget, ports: tuple[HeadPort, ...]) -> tuple[str, ...]:
    """What another deployment's preflight reads off this container: its memory budget on the node in bytes,
    the fixed ports it listens on there (the API's apart: launch-cluster.sh --port moves it), and on the
    head where its endpoint is."""
    labels = []
    if budget.bytes:
        labels.append(f"sparkc.memory-budget={budget.bytes}")
    if any(p.what == "API" for p in ports):
        labels.append(f"sparkc.api-port={d.api_port}")
    others = sorted({p.port for p in ports if p.what != "API"})
    if others:
        labels.append("sparkc.ports=" + ",".join(map(str, others)))
    if node.name == d.head.name:
        labels.append(f"sparkc.endpoint-host={d.head.ssh or d.head.fabric.ip}")
    return tuple(labels)


def probe_run(d: Deployment, node: Node, rank: int, env: tuple[Setting, ...], port: int, timeout: int) -> Command:
    """The fabric probe's container on this node: the deployment's image, devices, mounts and
    environment, with torchrun's variables; the launcher appends the program (python3 -c ...)."""
    ranks = (
        ("RANK", str(rank)),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", str(len(d.nodes))),
        ("MASTER_ADDR", d.head.control_ip),  # the rendezvous rides the control plane
        ("MASTER_PORT", str(port)),
        ("SPARKC_PROBE_TIMEOUT", str(timeout)),
    )
    groups: list[Words] = [("docker", "run"), ("-d",), ("--name", container_name(d, node) + "-probe")]
    groups += [("--label", f"sparkc.probe={d.spec.name}")]
    groups += _options(d, node, tuple(s for s in env if s.name not in dict(ranks)))
    groups += [("-e", f"{name}={value}") for name, value in ranks]
    return (*groups, ("--entrypoint", "python3"), (d.spec.container.image,))


def _options(d: Deployment, node: Node, env: tuple[Setting, ...]) -> list[Words]:
    """What the engine's container and the probe's share: network, devices, limits, mounts, env."""
    container = d.spec.container
    groups: list[Words] = [("--network", "host"), ("--ipc", "host")]
    if container.gpus == "all":
        groups.append(("--gpus", "all"))
    if container.privileged:
        groups.append(("--privileged",))
    else:
        if node.fabric.hcas:
            groups.append(("--device", "/dev/infiniband"))
        groups.append(("--cap-add", "IPC_LOCK"))
    ulimits = {**DEFAULT_ULIMITS, **container.ulimits}
    groups += [("--ulimit", f"{limit}={value}") for limit, value in sorted(ulimits.items()) if value is not None]
    # No --shm-size: beside --ipc host the container's /dev/shm is the host's and docker ignores it (a rule says so).
    groups += model_mounts(d)
    groups += [("-v", f"{m.host}:{m.container}" + (":ro" if m.readonly else "")) for m in container.mounts]
    groups += cache_mount(d)
    groups += [("-e", f"{s.name}={s.value}") for s in env]
    return groups + log_options(d)


def log_options(d: Deployment) -> list[Words]:
    """docker's json-file driver, bounded: a chatty engine cannot fill the node's disk, and `docker logs`
    (which reads this driver) keeps working. Named explicitly: a daemon's own default driver may be another."""
    logs = d.spec.container.logs
    return [
        ("--log-driver", "json-file"),
        ("--log-opt", f"max-size={logs.max_size}"),
        ("--log-opt", f"max-file={logs.max_file}"),
    ]


def model_mounts(d: Deployment) -> Command:
    """The weights, read-only; from a Hugging Face cache the snapshot and, beside it as in the cache, the
    blobs its files link to (../../blobs/...), so the links resolve in the container too."""
    model = d.spec.model
    hf = model.hf
    if hf is None:
        mounts: Command = (("-v", f"{model.path}:{model.mount}:ro"),)
    else:
        snapshot = f"{hf.repo_folder}/snapshots/{SNAPSHOT_PLACEHOLDER if not hf.pinned else hf.revision}"
        blobs = model.mount.rsplit("/", 2)[0] + "/blobs"
        mounts = (("-v", f"{snapshot}:{model.mount}:ro"), ("-v", f"{hf.repo_folder}/blobs:{blobs}:ro"))
    draft = model.draft
    if draft is not None and draft.path is not None:  # ngram, suffix, mtp from the model: nothing to mount
        mounts += (("-v", f"{draft.path}:{draft.mount}:ro"),)
    return mounts


def model_plan(d: Deployment) -> ModelPlan:
    model = d.spec.model
    hf = model.hf
    return ModelPlan(
        revision=(hf.revision if hf else model.revision) or "",
        folder=hf.repo_folder if hf else model.path,
        hf="" if hf is None else ("pinned" if hf.pinned else "ref"),
        snapshot_placeholder=SNAPSHOT_PLACEHOLDER if hf and not hf.pinned else "",
        draft_folder=(model.draft.path or "") if model.draft else "",
        speculative=describe(model.draft, d.engine.kind, d.engine.name) if model.draft else "",
        drop_page_cache=d.spec.launch.drop_page_cache,
        aliases=model.aliases,
    )


def image_build_plan(d: Deployment) -> BuildPlan | None:
    """build-image.sh: container.build as docker build's words, the Dockerfile named inside its context."""
    build = d.spec.container.build
    if build is None:
        return None
    dockerfile = f"{build.context.rstrip('/')}/{build.dockerfile}"
    return BuildPlan(build.context, dockerfile, tuple(f"{k}={v}" for k, v in build.args.items()))


def fetch_plan(d: Deployment) -> FetchPlan:
    """fetch-model.sh: the repo at the spec's revision, into the Hugging Face cache or the weights' folder."""
    model = d.spec.model
    name = f"sparkc-{d.spec.name}-fetch"
    draft = model.draft
    beside = (draft.repo, draft.path) if draft is not None and draft.repo and draft.path else ("", "")
    if model.hf is not None:
        return FetchPlan(model.hf.repo, model.hf.revision, model.hf.cache, FetchMode.CACHE, name, *beside)
    return FetchPlan(model.repo or "", model.revision or "main", model.path, FetchMode.FOLDER, name, *beside)


# Concurrencies a first look at an endpoint needs: one user, a few, many; prompts of a chat's size.
BENCH_CONCURRENCIES = (1, 4, 16)
BENCH_INPUT_LEN = 512
BENCH_OUTPUT_LEN = 128


def bench_plan(d: Deployment) -> BenchPlan:
    hf, container = d.spec.model.hf, d.spec.container
    # The weights (the benchmark reads the tokenizer there), the spec's own mounts and variables: what the
    # image needs to run its programs (a venv mounted in, a PATH), not the engine's per-node settings.
    mounts = model_mounts(d) + tuple(
        ("-v", f"{m.host}:{m.container}" + (":ro" if m.readonly else "")) for m in container.mounts
    )
    return BenchPlan(
        command=d.engine.bench_command,
        mounts=mounts,
        env=tuple(("-e", f"{name}={value}") for name, value in sorted(container.env.items())),
        snapshot_ref=f"{hf.repo_folder}/refs/{hf.revision}" if hf and not hf.pinned else "",
        tokenizer=d.spec.model.mount,
        concurrencies=BENCH_CONCURRENCIES,
        input_len=BENCH_INPUT_LEN,
        output_len=BENCH_OUTPUT_LEN,
        container_name=f"sparkc-{d.spec.name}-bench",
    )


def _ray_start(d: Deployment, node: Node, rank: int) -> tuple[str, Command]:
    launch = d.spec.launch
    common: Command = (
        (f"--node-ip-address={node.control_ip}",),
        (f"--num-gpus={node.gpus}",),
        (f"--object-store-memory={launch.ray_object_store_memory}",),
        ("--disable-usage-stats",),
        ("--block",),
    )
    if rank == 0:
        return "ray", (("start",), ("--head",), (f"--port={launch.ray_port}",), *common)
    return "ray", (("start",), (f"--address={host_port(d.head.control_ip, launch.ray_port)}",), *common)


def _mpi_sshd(d: Deployment, node: Node) -> tuple[str, Command]:
    """backend mpi: the container runs sshd (the library's script, put in by the launcher) on the node's
    address, where mpirun in the head's container starts the ranks; the secrets stay out of the environment
    it gives them (mpirun passes those by -x)."""
    args = (str(d.spec.launch.mpi_ssh_port), node.control_ip, *d.spec.container.secrets)
    return "sh", (("-c", MPI_SSHD_PLACEHOLDER), ("sparkc-mpi-sshd", *args))


def mpi_engine(d: Deployment) -> Command:
    """backend mpi: mpirun in the head's container, one rank per GPU in the hostfile's order (head first), each
    through trtllm-llmapi-launch: rank 0 runs trtllm-serve, the others serve it as MPI workers."""
    argv = d.engine.argv(d, 0)
    mpirun: list[Words] = [
        ("mpirun",),
        ("--hostfile", f"{FILES_MOUNT}/{HOSTFILE}"),
        ("-np", str(d.total_gpus)),
        ("--bind-to", "none"),
    ]
    mpirun += [("-x", name) for name in d.spec.container.secrets]
    return (*mpirun, ("trtllm-llmapi-launch",), *argv.command)


def _engine_command(d: Deployment, rank: int) -> tuple[str, Command]:
    """(--entrypoint override or "", the words after the image) that make the container run the engine."""
    argv = d.engine.argv(d, rank)
    profile, mode = d.profile, d.entrypoint.mode
    if mode is EntrypointMode.BYPASS:
        program, *rest = argv.command
        return program[0], ((program[1:],) if len(program) > 1 else ()) + tuple(rest)
    if profile is None or profile.args is ArgsStyle.COMMAND:
        return "", argv.command
    if profile.args is ArgsStyle.ENGINE_ARGS:
        return "", _after_prefix(argv.command, profile.entrypoint or ())
    return "", env_driven_words(d, argv)


def ray_engine(d: Deployment) -> Command:
    """Ray (or MPI): the engine's command, run in the head's container once the group formed; () otherwise."""
    if d.backend is Backend.MPI:
        return mpi_engine(d)
    if d.backend is not Backend.RAY:
        return ()
    argv = d.engine.argv(d, 0)
    profile = d.profile
    if (
        d.entrypoint.mode is not EntrypointMode.BYPASS
        and profile
        and profile.args is ArgsStyle.ENV_DRIVEN
        and profile.entrypoint
    ):
        return tuple((word,) for word in profile.entrypoint) + env_driven_words(d, argv)
    return argv.command


def env_driven_words(d: Deployment, argv: EngineArgv) -> Command:
    """The words an env-driven entrypoint appends to the command it builds itself: the engine's flags
    minus the ones it sets from its variables (it names the program and the model itself)."""
    assert d.profile is not None
    controlled = {d.engine.setting_flags.get(setting) for setting, _ in d.profile.controls}
    return tuple(group for group in argv.flags if group[0] not in controlled) + argv.user


def _after_prefix(command: Command, prefix: tuple[str, ...]) -> Command:
    """The command without the words the entrypoint already runs (`vllm serve`), when it starts with them."""
    if flat(command)[: len(prefix)] != prefix:
        return command
    rest, dropped = list(command), 0
    while rest and dropped + len(rest[0]) <= len(prefix):
        dropped += len(rest.pop(0))
    return tuple(rest)
