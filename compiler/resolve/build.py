"""Build the Plan from a deployment the rules found sound. Builds only: nothing here reports."""

from __future__ import annotations

import json

from compiler import __version__
from compiler.engines import host_port
from compiler.engines.trtllm import FILES_DIR, HOSTFILE, hostfile_text
from compiler.plan import (
    Command,
    CopyRoute,
    HomeMount,
    NodePlan,
    Plan,
    Planes,
    PortControl,
    ProfileCheck,
    Role,
    Setting,
    Transport,
)
from compiler.resolve.budget import memory_budget, node_ports
from compiler.resolve.cache import cache_host_dir
from compiler.resolve.containers import (
    bench_plan,
    container_name,
    docker_run,
    fetch_plan,
    image_build_plan,
    model_plan,
    probe_run,
    ray_engine,
    share_labels,
)
from compiler.resolve.context import Deployment
from compiler.resolve.copy_routes import CopyNode, copy_routes
from compiler.resolve.engine_args import api_key_given, api_key_variable
from compiler.resolve.env import fabric_prefix, node_envs, split_planes, switchless
from compiler.resolve.explain import quirks, settings
from compiler.resolve.hooks import hook_plan, host_hook_plan
from compiler.resolve.ports import API_PORT_LABEL, api_port_control, head_ports, port_words
from compiler.resolve.service import service_plan
from compiler.spec.profiles import RayPresence
from compiler.spec.typed import Backend, EntrypointMode, Node, Ssh

# The probe's own limit: long enough for a cold container to import torch and meet the other ranks.
PROBE_TIMEOUT = 60


def probe_port(d: Deployment) -> int:
    """The rendezvous port: free before the engine starts (the head checks it), and the engine's own
    rendezvous does not run yet."""
    return d.spec.launch.master_port


def build_plan(d: Deployment, spec_path: str, spec_sha256: str) -> Plan:
    assert d.api_port is not None, "rules reject a deployment without a port"
    envs = node_envs(d)
    key = api_key_given(d)
    control = api_port_control(d)
    nodes = tuple(_node_plan(d, node, rank, envs[node.name], control) for rank, node in enumerate(d.nodes))
    engine = ray_engine(d)
    engine_port = port_words(engine, control, d.api_port)
    if control.flag or control.variable:  # --port must reach the engine: a plan where it would not is a bug
        carried = (*nodes[0].api_port_words, *engine_port)
        assert any(p.prefix != API_PORT_LABEL for p in carried), "the head's words carry no API port"
    ray = d.backend is Backend.RAY
    head_wave, worker_wave = (nodes[0].name,), tuple(p.name for p in nodes[1:])
    # Ray: the head, then every worker at once. Native multi-node: ranks >= 1 at once (they wait for
    # the master), then rank 0.
    waves: tuple[tuple[str, ...], ...] = (head_wave, worker_wave) if ray else (worker_wave, head_wave)
    if d.backend is Backend.MPI:  # sshd alone in each: every container at once, mpirun comes later
        waves = (tuple(p.name for p in nodes),)
    host = d.value("host")
    probe_host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    endpoint_host = d.head.ssh or d.head.fabric.ip
    return Plan(
        sparkc_version=__version__,
        spec_path=spec_path,
        spec_sha256=spec_sha256,
        name=d.spec.name,
        engine_kind=d.engine.kind,
        backend=d.backend,
        topology=d.topology,
        image=d.spec.container.image,
        profile=d.profile.id if d.profile else "",
        entrypoint_mode=d.entrypoint.mode,
        head=d.head.name,
        head_fabric_ip=d.head.control_ip,
        nodes=nodes,
        start_waves=tuple(w for w in waves if w),
        ray_engine=engine,
        api_port=d.api_port,
        probe_host=probe_host,
        api_bind_host=host,
        probe_url=f"http://{host_port(probe_host, d.api_port)}",
        endpoint_url=f"http://{host_port(endpoint_host, d.api_port)}",
        probe_url_host=_url_host(probe_host),
        endpoint_host=_url_host(endpoint_host),
        served_model_name=d.served_model_name,
        model_host_path=d.spec.model.hf.repo_folder if d.spec.model.hf else d.spec.model.path,
        mount_sources=tuple(dict.fromkeys(m.host for m in d.spec.container.mounts)),
        home_mounts=tuple(HomeMount(i, m.host) for i, m in enumerate(d.spec.container.mounts) if m.in_home),
        ray_port=d.spec.launch.ray_port,
        master_port=d.spec.launch.master_port,
        # Installed by a hook, Ray exists only once the hooks ran: `ray start` after them is the check.
        ray_required=ray and d.ray_presence is not RayPresence.PRESENT and not d.hooks_install_ray,
        ray_expected_ips=tuple(p.control_ip for p in nodes) if ray else (),
        total_gpus=d.total_gpus,
        nccl_check=d.nccl_check,
        probe=d.probe,
        probe_port=probe_port(d),
        probe_timeout=PROBE_TIMEOUT,
        cache_host=cache_host_dir(d),
        head_ports=head_ports(d),
        api_port_control=control,
        launch_timeout=d.spec.launch.timeout,
        engine_timeout=d.engine_timeout,
        engine_timeout_margin=d.engine_timeout_margin,
        engine_timeout_variable=d.engine.timeout_variable or "",
        engine_timeout_flag=d.engine.timeout_flag or "",
        ssh_options=ssh_options(d.spec.cluster.ssh),
        secrets=d.spec.container.secrets,
        api_key_variable=api_key_variable(d) or "",
        api_key_given=key[1] if key else "",
        effective=d.entrypoint.effective,
        quirks=quirks(d),
        settings=settings(d),
        profile_check=_profile_check(d),
        model=model_plan(d),
        hooks=hook_plan(d),
        host_hooks=host_hook_plan(d),
        service=service_plan(d),
        fetch=fetch_plan(d),
        build=image_build_plan(d),
        bench=bench_plan(d),
        engine_files=engine_files(d),
        mpi_ssh_port=d.spec.launch.mpi_ssh_port if d.backend is Backend.MPI else 0,
        mpi_sshd_from_hooks=d.backend is Backend.MPI and d.hooks_install_sshd,
        start_gate=d.engine.start_gate(d),
        metrics=d.engine.metrics,
        metrics_absent=d.engine.metrics_absent,
        engine_api_port_words=engine_port,
        copy_routes=_copy_routes(d),
        watch_on_failure=d.spec.watch.on_failure or "",
    )


def engine_files(d: Deployment) -> tuple[tuple[str, str], ...]:
    """The engine's own files, and under mpirun its hostfile beside them."""
    files = d.engine.build_files(d)
    if d.backend is Backend.MPI:
        files += ((f"{FILES_DIR}/{HOSTFILE}", hostfile_text(d)),)
    return files


def _node_plan(d: Deployment, node: Node, rank: int, env: tuple[Setting, ...], control: PortControl) -> NodePlan:
    user = d.spec.cluster.ssh.user
    target = "" if rank == 0 else (f"{user}@{node.ssh}" if user else node.ssh or "")
    # distribute.sh copies over the fabric; in a mesh or ring a cable reaches one neighbour, the control plane all.
    copy_ip = node.control_ip if switchless(d.topology) else node.fabric.ip
    fabric_ip = f"[{copy_ip}]" if ":" in copy_ip else copy_ip
    port = probe_port(d)
    budget, ports = memory_budget(d, node), node_ports(d, node)
    run = docker_run(d, node, rank, env, share_labels(d, node, budget, ports))
    probe = probe_run(d, node, rank, env, port, PROBE_TIMEOUT) if d.probe else ()
    return NodePlan(
        name=node.name,
        role=Role.HEAD if rank == 0 else Role.WORKER,
        rank=rank,
        ssh_target=target,
        fabric_ip=node.fabric.ip,
        netdev=node.fabric.netdev,
        hcas=node.fabric.hcas,
        gpus=node.gpus,
        container_name=container_name(d, node),
        env=env,
        docker_run=run,
        nccl_transport=_nccl_transport(d, node, rank),
        planes=Planes((node.control or node.fabric).netdev, node.control_ip, node.fabric.netdevs)
        if split_planes(node)
        else None,
        probe_run=probe,
        fabric_target=f"{user}@{fabric_ip}" if user else fabric_ip,
        budget=budget,
        ports=ports,
        fabric_addresses=tuple(node.fabric.addresses.items()),
        cabled=node.cabled,
        api_port_words=port_words(run, control, d.api_port or 0),
        probe_api_port_words=port_words(probe, control, d.api_port or 0),
    )


def _copy_routes(d: Deployment) -> tuple[CopyRoute, ...]:
    nodes = [CopyNode(n.name, (n.fabric.ip, *n.fabric.addresses.values()), n.control_ip) for n in d.nodes]
    return copy_routes(nodes, fabric_prefix(d), d.spec.cluster.ssh.user)


def _url_host(host: str) -> str:
    """A host as a URL writes it before `:PORT`: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _nccl_transport(d: Deployment, node: Node, rank: int) -> Transport:
    """What NCCL must report in this node's container log. Ray forwards every worker's output to the
    engine on the head, and so does mpirun (the ranks it starts over ssh write to its own output, in the
    head's container; the other containers' logs hold sshd's only): there the head speaks for all."""
    if d.backend in (Backend.RAY, Backend.MPI):
        if rank > 0:
            return Transport.UNCHECKED
        return Transport.IB if all(n.fabric.hcas for n in d.nodes) else Transport.SOCKET
    return Transport.IB if node.fabric.hcas else Transport.SOCKET


def ssh_options(ssh: Ssh) -> Command:
    # ssh keeps the first value of each option: sparkc's keep-alive only where the spec sets none.
    own_interval = any(o.lower().startswith("serveraliveinterval=") for o in ssh.options)
    keep_alive: Command = () if own_interval else (("-o", "ServerAliveInterval=15"),)
    options: Command = (
        ("-o", "BatchMode=yes"),
        ("-o", f"ConnectTimeout={ssh.connect_timeout}"),
        *keep_alive,
        ("-p", str(ssh.port)),
    )
    if ssh.identity_file is not None:
        options += (("-i", ssh.identity_file), ("-o", "IdentitiesOnly=yes"))
    return options + tuple(("-o", option) for option in ssh.options)


def _profile_check(d: Deployment) -> ProfileCheck:
    profile, mode = d.profile, d.entrypoint.mode
    if profile is None:
        return ProfileCheck("", (), fatal=False)
    pinned = profile.entrypoint is not None
    return ProfileCheck(
        entrypoint_json=json.dumps(list(profile.entrypoint or ()), separators=(",", ":")) if pinned else "",
        env_defaults=tuple(f"{c.env}={c.default}" for _, c in profile.controls) if mode is EntrypointMode.KEEP else (),
        fatal=mode in (EntrypointMode.KEEP, EntrypointMode.ADAPT),
        # Only where the entrypoint runs: bypass does not depend on what it does.
        entrypoint_sha256=profile.entrypoint_sha256 if pinned and mode is not EntrypointMode.BYPASS else "",
        entrypoint_path=(profile.entrypoint or ("",))[0] if pinned and mode is not EntrypointMode.BYPASS else "",
    )
