"""The ports the head must have free before anything starts, and how the API's port can move at launch."""

from __future__ import annotations

from compiler.plan import Command, HeadPort, PortControl, PortWord
from compiler.resolve.context import Deployment
from compiler.spec.profiles import ArgsStyle
from compiler.spec.typed import Backend, EntrypointMode

# Ray's head listens on these besides its own port; the API must not take them.
RAY_WELL_KNOWN_PORTS = {8265: "Ray dashboard", 10001: "Ray client server"}


def head_ports(d: Deployment) -> tuple[HeadPort, ...]:
    ports = [HeadPort(d.api_port or 0, "API")]
    launch, engine = d.spec.launch, d.spec.engine
    data_parallel = d.multi and engine.data_parallel > 1
    if data_parallel and d.engine.replicas_whole_per_node:
        # Every replica lives on one node: the nodes meet only on the head's RPC port, not a rendezvous.
        ports.append(HeadPort(launch.data_parallel_rpc_port, "data-parallel RPC"))
    elif d.backend is Backend.RAY:
        ports.append(HeadPort(launch.ray_port, "Ray"))
    elif d.backend is Backend.MPI:
        ports.append(HeadPort(launch.mpi_ssh_port, "MPI ssh"))
    elif d.multi:
        ports.append(HeadPort(launch.master_port, "rendezvous"))
    offset = d.engine.dp_handshake_offset
    if data_parallel and offset is not None:
        ports.append(HeadPort(launch.master_port + offset, "attention-DP handshake"))
    return tuple(ports)


def api_port_control(d: Deployment) -> PortControl:
    """Where the compiled words carry the API's port, as resolve_entrypoint decided: the engine's flag
    (bypass, or an entrypoint that runs the words as given), the variable an adapted entrypoint reads,
    or nowhere (keep, with an entrypoint that reads its own variable and ignores the words)."""
    taken = tuple(p for p in head_ports(d) if p.what != "API")
    if d.backend is Backend.RAY:
        taken += tuple(HeadPort(port, what) for port, what in RAY_WELL_KNOWN_PORTS.items())
    profile, mode = d.profile, d.entrypoint.mode
    control = profile.control("port") if profile and profile.args is ArgsStyle.ENV_DRIVEN else None
    if control is None or mode is EntrypointMode.BYPASS:
        return PortControl(d.engine.setting_flags["port"], "", "", taken)
    if mode is EntrypointMode.ADAPT:
        return PortControl("", control.env, "", taken)
    assert profile is not None
    fixed = (
        f"the image's entrypoint decides the API port itself (profile {profile.id}, entrypoint: keep: it reads "
        f"{control.env} and ignores the command line)"
    )
    return PortControl("", "", fixed, taken)


# The label other deployments' preflight and `status.sh --all` read the API's port from; it moves with --port.
API_PORT_LABEL = "sparkc.api-port="


def port_words(command: Command, control: PortControl, port: int) -> tuple[PortWord, ...]:
    """The words of `command` that carry the API's port, as this compile wrote them: the value after the
    engine's flag (or `--flag=PORT`), the adapted entrypoint's `-e VARIABLE=PORT`, the label. Found here,
    where the words were just built, so that `launch-cluster.sh --port` rewrites them by position."""
    found: list[PortWord] = []
    before = ""
    for g, group in enumerate(command):
        for w, word in enumerate(group):
            if control.flag and before == control.flag and word == str(port):
                found.append(PortWord(g, w, ""))
            elif control.flag and word == f"{control.flag}={port}":
                found.append(PortWord(g, w, f"{control.flag}="))
            elif control.variable and before == "-e" and word == f"{control.variable}={port}":
                found.append(PortWord(g, w, f"{control.variable}="))
            elif before == "--label" and word == f"{API_PORT_LABEL}{port}":
                found.append(PortWord(g, w, API_PORT_LABEL))
            before = word
    return tuple(found)
