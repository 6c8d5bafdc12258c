"""The cluster-wide settings and profile notes that `explain` and the manifest show, each with its source."""

from __future__ import annotations

from compiler.engines.speculative import describe
from compiler.plan import Setting
from compiler.resolve.context import Deployment
from compiler.resolve.engine_args import repeats
from compiler.resolve.ports import head_ports
from compiler.spec.profiles import ArgsStyle, Profile, overridden
from compiler.spec.typed import Backend, EntrypointMode, Source


def settings(d: Deployment) -> tuple[Setting, ...]:
    engine, launch, container, draft = d.spec.engine, d.spec.launch, d.spec.container, d.spec.model.draft
    port = d.entrypoint.of("port")
    served = d.entrypoint.of("served_model_name")
    auto_entrypoint = container.entrypoint is EntrypointMode.AUTO and d.profile is not None
    return (
        Setting("engine", d.engine.kind, Source.SPEC),
        Setting(
            "backend",
            d.backend,
            engine.source("backend"),
            "" if engine.is_given("backend") else _backend_reason(d),
        ),
        Setting(
            "entrypoint",
            d.entrypoint.mode,
            Source.PROFILE if auto_entrypoint else container.source("entrypoint"),
            (f"profile {d.profile.id}" + (f" ({d.profile.origin})" if d.profile.origin else "")) if d.profile else "",
        ),
        Setting("api_port", str(d.api_port), port.source, port.reason),
        Setting("served_model_name", served.effective, served.source, served.reason),
        Setting("tensor_parallel", str(engine.tensor_parallel), engine.source("tensor_parallel")),
        Setting("pipeline_parallel", str(engine.pipeline_parallel), engine.source("pipeline_parallel")),
        *_parallel(d),
        Setting("total_gpus", str(d.total_gpus), Source.DERIVED, "sum of cluster.nodes[].gpus"),
        *(
            ()
            if draft is None
            else (
                Setting(
                    "speculative", draft.method, draft.source("method"), describe(draft, d.engine.kind, d.engine.name)
                ),
            )
        ),
        Setting("launch_timeout", str(launch.timeout), launch.source("timeout")),
        Setting("engine_timeout", str(d.engine_timeout), Source.DERIVED, f"launch.timeout - {d.engine_timeout_margin}"),
        *_group_ports(d),
        Setting("log_max_size", container.logs.max_size, container.logs.source("max_size"), "per log file, json-file"),
        Setting("log_max_file", str(container.logs.max_file), container.logs.source("max_file")),
        Setting(
            "nccl_check",
            "on" if d.nccl_check else "off",
            launch.source("nccl_check"),
            "" if launch.is_given("nccl_check") else _nccl_check_reason(d),
        ),
    )


def _nccl_check_reason(d: Deployment) -> str:
    engine = d.spec.engine
    if d.engine.replicas_whole_per_node and engine.data_parallel > 1 and not engine.expert_parallel:
        return (
            f"off: {d.engine.name}'s replicas run whole on their nodes and exchange nothing over NCCL across the fabric"
        )
    return "on for several nodes with RDMA devices"


def _backend_reason(d: Deployment) -> str:
    if d.spec.engine.data_parallel > 1:
        return "data parallel: the engine's own multi-node mode, one engine per replica"
    return "vLLM on several nodes: ray; TensorRT-LLM: mpi; otherwise native"


def _parallel(d: Deployment) -> tuple[Setting, ...]:
    """Data and expert parallel, where the spec asks for them (a deployment without shows neither)."""
    engine, launch = d.spec.engine, d.spec.launch
    rows = []
    if engine.data_parallel > 1 or engine.is_given("data_parallel"):
        rows.append(Setting("data_parallel", str(engine.data_parallel), engine.source("data_parallel")))
    if engine.expert_parallel or engine.is_given("expert_parallel"):
        size = engine.tensor_parallel * engine.data_parallel
        why = f"experts spread over tensor_parallel x data_parallel = {size} GPUs" if engine.expert_parallel else ""
        rows.append(
            Setting("expert_parallel", "on" if engine.expert_parallel else "off", engine.source("expert_parallel"), why)
        )
    if any(p.what == "data-parallel RPC" for p in head_ports(d)):
        rows.append(
            Setting(
                "data_parallel_rpc_port",
                str(launch.data_parallel_rpc_port),
                launch.source("data_parallel_rpc_port"),
                "the head's port where the other nodes' engines connect",
            )
        )
    return tuple(rows)


def _group_ports(d: Deployment) -> tuple[Setting, ...]:
    launch = d.spec.launch
    ports = (
        Setting("ray_port", str(launch.ray_port), launch.source("ray_port")),
        Setting("master_port", str(launch.master_port), launch.source("master_port")),
    )
    if d.backend is not Backend.MPI:
        return ports
    why = "sshd in every container, where mpirun starts the ranks"
    return (*ports, Setting("mpi_ssh_port", str(launch.mpi_ssh_port), launch.source("mpi_ssh_port"), why))


def quirks(d: Deployment) -> tuple[str, ...]:
    profile, mode = d.profile, d.entrypoint.mode
    if profile is None:
        return ("no image profile: the entrypoint is bypassed unless the spec says keep", *agreeing_flags(d))
    notes = [f"profile {profile.id} ({profile.family}); entrypoint: {mode}", *_origin(profile), *profile.notes]
    notes += [f"{_side_effect_where(d)}: {s}" for s in profile.side_effects]
    if d.backend is Backend.RAY:
        notes.append("Ray containers run `ray start` with --entrypoint ray; the engine starts by docker exec")
    if d.backend is Backend.MPI:
        notes.append("every container runs sshd with --entrypoint sh; mpirun starts the engine by docker exec")
    return (*notes, *agreeing_flags(d))


def _side_effect_where(d: Deployment) -> str:
    """Where the image's entrypoint, and so its side effects, really runs: Ray's containers start with
    --entrypoint ray, and only the head's engine, started by docker exec, goes through an env-driven one."""
    assert d.profile is not None
    if d.entrypoint.mode is EntrypointMode.BYPASS:
        return "bypassed entrypoint skips"
    if d.backend is Backend.MPI:
        return "entrypoint side effect not run: the containers start sshd with --entrypoint sh, mpirun by docker exec"
    if d.backend is not Backend.RAY:
        return "entrypoint side effect kept on every node" if d.multi else "entrypoint side effect kept"
    if d.profile.args is ArgsStyle.ENV_DRIVEN and d.profile.entrypoint:
        return f"entrypoint side effect on the head ({d.head.name}) only, where the engine starts through it" + (
            "; the Ray workers run `ray start` without it" if d.multi else ""
        )
    return "entrypoint side effect not run: Ray containers start with --entrypoint ray, the engine by docker exec"


def _origin(profile: Profile) -> tuple[str, ...]:
    """Which profile won, where the operator has their own."""
    if not profile.origin:
        return ()
    built_in = overridden(profile)
    instead = f"; it takes the place of the built-in profile {built_in.id}" if built_in else ""
    return (f"profile {profile.id} is your own, from {profile.origin}{instead}",)


def agreeing_flags(d: Deployment) -> tuple[str, ...]:
    """engine.args that repeat a flag sparkc sets, with the value the plan gives it: kept as written."""
    return tuple(
        f"engine.args repeats {r.written}{'' if r.value is None else ' ' + r.value}, which agrees with the plan: kept"
        for r in repeats(d)
        if r.agrees
    )
