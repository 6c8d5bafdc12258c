"""Rules about the engine, its image and its environment. They only report."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, Path, error, warning
from compiler.engines.flag_table import Problem, releases_with
from compiler.names import SECRET_NAME, is_reserved
from compiler.plan import MAX_LAUNCH_TIMEOUT
from compiler.resolve.context import Deployment
from compiler.resolve.engine_args import api_key_given, managed_fields, read_args, repeats
from compiler.resolve.entrypoint import known_images, setting_path
from compiler.resolve.env import IFNAME_VARS, interfaces, node_envs, split_planes
from compiler.resolve.ports import RAY_WELL_KNOWN_PORTS, head_ports
from compiler.resolve.rules.cluster import bad_scope
from compiler.spec.profiles import RayPresence
from compiler.spec.typed import Backend, EntrypointMode, Topology

HOST_NAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


def image_profile(d: Deployment) -> Iterator[Diagnostic]:
    mode, path = d.spec.container.entrypoint, ("container", "entrypoint")
    if d.profile is None and mode is EntrypointMode.BYPASS:
        return  # the spec already says not to rely on the image's entrypoint
    if d.profile is None:
        yield warning(
            ("container", "image"),
            f"no profile for image '{d.spec.container.image}': sparkc cannot tell what its entrypoint does "
            f"(known: {known_images(d.own_profiles)}); entrypoint auto means bypass. Write entrypoint: bypass, "
            "or describe the image in your own profile (sparkc profile IMAGE drafts one)",
        )
        if mode is EntrypointMode.ADAPT:
            yield error(path, "adapt needs a known image profile (the variables its entrypoint reads); use bypass")
        elif mode is EntrypointMode.KEEP:
            yield warning(path, "keep with an unknown image: sparkc assumes the entrypoint runs the command as given")
    elif d.profile.engine != d.spec.engine.kind:
        yield warning(
            ("container", "image"),
            f"image profile '{d.profile.id}' is a {d.profile.engine} image, but engine.kind is {d.spec.engine.kind}",
        )


def effective_differs(d: Deployment) -> Iterator[Diagnostic]:
    for e in d.entrypoint.effective:
        if e.differs:
            yield warning(
                setting_path(e.setting, d.spec),
                f"the image will use {e.effective or '(its default)'}, not {e.requested or '(unset)'}: {e.reason}",
            )


def engine_host(d: Deployment) -> Iterator[Diagnostic]:
    host = d.spec.engine.host
    scope = bad_scope(host)
    if scope:
        yield error(d.spec.engine.at("host"), scope)
        return
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not HOST_NAME.fullmatch(host):
            yield error(
                d.spec.engine.at("host"),
                f"{host!r} is neither an IP address nor a host name; the engine listens on it (0.0.0.0: everywhere)",
            )


def served_name_is_not_a_flag(d: Deployment) -> Iterator[Diagnostic]:
    model = d.spec.model
    name = model.name if model.name is not None else d.served_model_name
    if name.startswith("-"):
        given = model.name is not None
        yield error(
            model.at("name") if given else model.at("path"),
            f"the served name must not start with '-': the engine's argument parser would read {name!r} as a "
            "flag, not as the model's name; "
            + ("choose a name that starts with a letter or digit" if given else "set model.name to another name"),
        )


def served_aliases(d: Deployment) -> Iterator[Diagnostic]:
    """More served names go after the first in one --served-model-name, which only some engines allow."""
    model = d.spec.model
    if model.aliases and d.engine.aliases_refusal is not None:
        yield error(model.at("aliases"), d.engine.aliases_refusal)


def api_port_is_a_port(d: Deployment) -> Iterator[Diagnostic]:
    if d.api_port is None:
        yield error(
            setting_path("port", d.spec),
            f"the image's entrypoint would listen on '{d.value('port')}', which is not a port; "
            "set a port from 1 to 65535",
        )


def ports_distinct(d: Deployment) -> Iterator[Diagnostic]:
    used = head_ports(d)
    engine = d.spec.engine
    launch = d.spec.launch
    paths: dict[str, Path] = {
        "API": engine.at("port") if engine.is_given("port") else engine.location,
        "Ray": launch.at("ray_port"),
        "rendezvous": launch.at("master_port"),
        "data-parallel RPC": launch.at("data_parallel_rpc_port"),
        "attention-DP handshake": launch.at("master_port"),
        "MPI ssh": launch.at("mpi_ssh_port"),
    }
    given = {
        "API": engine.is_given("port"),
        "Ray": launch.is_given("ray_port"),
        "rendezvous": launch.is_given("master_port"),
        "data-parallel RPC": launch.is_given("data_parallel_rpc_port"),
        "attention-DP handshake": launch.is_given("master_port"),
        "MPI ssh": launch.is_given("mpi_ssh_port"),
    }
    offset = d.engine.dp_handshake_offset or 0  # only a port above the rendezvous port can pass 65535
    for port in used:
        if port.port > 65535:
            yield error(
                paths[port.what],
                f"{d.engine.name}'s attention data parallel also listens on launch.master_port + {offset} "
                f"= {port.port}, which is no port; write a master_port of at most {65535 - offset}",
            )
    for i, port in enumerate(used):
        for other in used[:i]:
            if port.port == other.port:
                # Point at the one the user wrote; a default is not where the mistake is.
                where = port.what if given[port.what] or not given[other.what] else other.what
                yield error(
                    paths[where],
                    f"the {port.what} port {port.port} is also the {other.what} port; every port must be distinct",
                )
    if d.backend is Backend.RAY and d.api_port in RAY_WELL_KNOWN_PORTS:
        yield error(paths["API"], f"port {d.api_port} is taken by the {RAY_WELL_KNOWN_PORTS[d.api_port]} on the head")


def managed_flags(d: Deployment) -> Iterator[Diagnostic]:
    for repeat in repeats(d):
        if repeat.agrees:
            continue
        managed = managed_fields(d)
        field = managed.get(repeat.flag) or managed.get(repeat.written, "the spec")
        also = "" if repeat.written == repeat.flag else f" (as {repeat.flag})"
        planned = f"; the plan gives it {repeat.planned or '(no value)'}" if repeat.planned is not None else ""
        yield error(
            d.spec.engine.at("args", repeat.index),
            f"{repeat.written}{also} is set by sparkc{planned}; use {field} instead",
        )


def engine_args_parse(d: Deployment) -> Iterator[Diagnostic]:
    """engine.args as the image's engine release parses them: an unknown flag, a missing or unwanted value
    and a stray word are refused here, not minutes into a model load. Refused only where sparkc knows the
    image's release and has its table; else compared with the nearest table it has and only warned about
    (the image's own release may take a flag the table lacks)."""
    engine = d.spec.engine
    if not engine.args:
        return
    choice = d.flag_choice
    name, table = d.engine.name, choice.table.version
    if choice.release is None:
        yield warning(
            engine.at("args"),
            f"sparkc cannot tell which {name} release the image {d.spec.container.image} holds: engine.args are "
            f"compared with the flag table of {name} {table}, {choice.nearest}, and what it refuses is only a "
            f"warning; to have it refused here, pin the release: {_how_to_pin(d)}",
        )
    elif not choice.binding:
        yield warning(
            engine.at("args"),
            f"sparkc has no flag table of {name} {choice.release}: engine.args are compared with the flag table of "
            f"{name} {table}, {choice.nearest}, and what it refuses is only a warning",
        )
    for problem in read_args(d)[1]:
        message = _unknown_flag(d, problem) if problem.unknown else problem.message
        if problem.severe and choice.binding:
            yield error(engine.at("args", problem.index), message)
        elif problem.severe:
            why = "does not know the image's release" if choice.release is None else "has no table of its release"
            yield warning(engine.at("args", problem.index), f"{message} (only a warning: sparkc {why})")
        else:
            yield warning(engine.at("args", problem.index), message)


def _unknown_flag(d: Deployment, problem: Problem) -> str:
    """A flag the table lacks: where other releases have it (it was removed, or is newer), say which."""
    table = d.flag_table
    flag = d.engine.canonical(problem.unknown)
    others = releases_with(d.spec.engine.kind, flag)
    if not others:
        return problem.message
    have = f"{table.display} {', '.join(others)} {'has' if len(others) == 1 else 'have'} it"
    release = f"{table.display} {table.version}"
    field = managed_fields(d).get(flag)
    if field is not None:  # a flag sparkc writes itself where the release takes it
        return f"{problem.unknown} is not a flag of {release} ({have}); use {field} instead"
    return f"{problem.unknown} is not a flag of {release}; {have}: remove it, or use an image of a release that has it"


def _how_to_pin(d: Deployment) -> str:
    own = "engine_version.release in an image profile of your own for it (a profiles/ folder beside the spec)"
    if d.profile is not None and d.profile.version_from_tag is not None:
        return f"a tag that names the release (the tags of {d.profile.family} can), or {own}"
    return own


def api_key(d: Deployment) -> Iterator[Diagnostic]:
    """A key in engine.args works, but is written into the scripts, the manifest and the process list."""
    found = api_key_given(d)
    if found is None:
        return
    index, given = found
    if given == "":
        yield error(d.spec.engine.at("args", index), "--api-key needs the key after it")
    elif d.engine.api_key_variable:
        yield warning(
            d.spec.engine.at("args", index),
            f"--api-key writes the key into the scripts, the manifest and the process list; list "
            f"{d.engine.api_key_variable} under container.secrets instead ({d.engine.name} reads it from there)",
        )
    else:
        yield warning(
            d.spec.engine.at("args", index),
            f"{d.engine.name} takes its API key only as --api-key: the key is written into the scripts, the "
            "manifest and the process list",
        )


def backend_supported(d: Deployment) -> Iterator[Diagnostic]:
    if d.backend is not Backend.RAY:
        return
    if not d.engine.supports_ray:
        own = d.engine.default_backend(len(d.spec.cluster.nodes))
        yield error(d.spec.engine.at("backend"), f"{d.engine.name} forms its own multi-node group; use backend: {own}")
    elif d.spec.engine.data_parallel > 1:
        yield error(
            d.spec.engine.at("backend"),
            "data parallel runs in vLLM's own multi-node mode: one vllm serve per node, the head serving the API "
            "and the others --headless, joined on launch.data_parallel_rpc_port (vLLM's Ray data parallel, "
            "--data-parallel-backend ray, places every replica from the head instead, which sparkc does not "
            "plan); write engine.backend: native, or remove it",
        )
    elif d.profile is not None and d.ray_presence is RayPresence.ABSENT and not d.hooks_install_ray:
        path = d.spec.engine.at("backend") if d.spec.engine.is_given("backend") else d.spec.container.at("image")
        yield error(
            path,
            f"{d.spec.container.image} ships without Ray ({d.profile.family}), so the Ray backend cannot start; "
            "write engine.backend: native, or install Ray first with a container.hooks.pre_engine command "
            "such as 'pip install ray'",
        )


def secrets_stay_secret(d: Deployment) -> Iterator[Diagnostic]:
    secrets = set(d.spec.container.secrets)
    for path, env in _env_layers(d):
        for name in env:
            if name in secrets:
                yield error((*path, name), f"{name} is listed in container.secrets; do not also set it here")
            elif SECRET_NAME.search(name.upper()):
                yield error(
                    (*path, name),
                    f"{name} looks like a secret: a value here would be written into the scripts and the manifest; "
                    "list the name under container.secrets and export it where the launcher runs",
                )


def secret_names(d: Deployment) -> Iterator[Diagnostic]:
    derived = {s.name for env in node_envs(d).values() for s in env}
    for i, name in enumerate(d.spec.container.secrets):
        path = d.spec.container.at("secrets", i)
        if is_reserved(name):
            yield error(
                path,
                f"{name} is the shell's own or starts with SPARKC_, BASH_ or LC_ (names the generated scripts and "
                "the shell keep for themselves); rename the secret",
            )
        elif name in derived:
            yield error(path, f"{name} is set by sparkc for every node; a secret of that name would replace it")
        elif name != name.upper():
            yield error(path, f"secret names are upper-case (HF_TOKEN, VLLM_API_KEY); write {name.upper()}")


def env_values(d: Deployment) -> Iterator[Diagnostic]:
    for path, env in _env_layers(d):
        for name, value in env.items():
            if name in IFNAME_VARS and path[0] != "cluster" and d.multi:
                yield warning(
                    (*path, name),
                    f"{name} set for every node overrides the per-node fabric netdev; set it per node "
                    "(cluster.nodes[].env) if the names differ",
                )
            if name == "GLOO_SOCKET_IFNAME" and re.search(r"[,^=]", value):
                yield error(
                    (*path, name),
                    "GLOO_SOCKET_IFNAME must be one interface name; Gloo crashes on NCCL-style lists "
                    "('^lo', 'a,b', '=if')",
                )
            if name == "NCCL_IB_GID_INDEX" and value == "":
                yield error(
                    (*path, name), "an empty NCCL_IB_GID_INDEX means GID 0; remove it to let NCCL pick the RoCEv2 GID"
                )


def env_overrides(d: Deployment) -> Iterator[Diagnostic]:
    """Settings in the spec's env that quietly undo one of sparkc's."""
    for path, env in _env_layers(d):
        debug = env.get("NCCL_DEBUG")
        if debug is not None and d.nccl_check and debug.upper() not in ("INFO", "TRACE"):
            yield warning(
                (*path, "NCCL_DEBUG"),
                f"NCCL_DEBUG={debug} hides the lines the fabric check reads (NCCL's INFO); remove it, or set "
                "launch.nccl_check: false to go without the check",
            )
        if "NCCL_NET_PLUGIN" in env and d.topology in (Topology.MESH, Topology.RING):
            yield warning(
                (*path, "NCCL_NET_PLUGIN"),
                f"NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']} replaces the topology's NCCL_NET_PLUGIN=none "
                f"(topology {d.topology}: no switch between the nodes)",
            )
    for node in d.spec.cluster.nodes:
        planned = {s.name: s for s in interfaces(node, d.topology)}
        for name in IFNAME_VARS:
            value = node.env.get(name)
            if value is None or value == planned[name].value:
                continue
            what = (
                f"{planned[name].value}, {planned[name].why}"
                if split_planes(node)
                else f"its fabric netdev {node.fabric.netdev}; fix cluster.nodes[].fabric.netdev"
            )
            yield warning(
                node.at("env", name),
                f"{name}={value} on {node.name} differs from {what} instead, so every setting follows",
            )


def memory_budget(d: Deployment) -> Iterator[Diagnostic]:
    fraction = d.spec.engine.gpu_memory_utilization
    if fraction is not None and fraction > 0.9:
        yield warning(
            d.spec.engine.at("gpu_memory_utilization"),
            f"{fraction} of unified memory leaves too little to the OS, page cache and the CPU side of the "
            "engine on a Spark (128 GB shared); vLLM starts there at 0.83 or less",
        )


def launch_timeout_fits(d: Deployment) -> Iterator[Diagnostic]:
    timeout = d.spec.launch.timeout
    if timeout > MAX_LAUNCH_TIMEOUT:
        yield error(
            d.spec.launch.at("timeout"),
            f"{timeout} seconds overflows the launcher's clock arithmetic; at most {MAX_LAUNCH_TIMEOUT} "
            "(3600 is an hour)",
        )


def image_pinned(d: Deployment) -> Iterator[Diagnostic]:
    image = d.spec.container.image
    name = image.split("@", 1)[0]
    tag = name.rpartition(":")[2] if ":" in name.rpartition("/")[2] else ""
    # latest-cu130 (NVIDIA's SGLang playbook) floats as latest does.
    if "@" not in image and (tag in ("", "latest") or tag.startswith("latest-")):
        yield warning(
            d.spec.container.at("image"),
            f"{image} names no fixed release: nodes pulled at different times run different builds; pin a tag "
            "or a digest (the launcher records the image ID each node ran)",
        )


def _env_layers(d: Deployment) -> list[tuple[Path, dict[str, str]]]:
    layers = [(d.spec.container.at("env"), d.spec.container.env), (d.spec.engine.at("env"), d.spec.engine.env)]
    return layers + [(n.at("env"), n.env) for n in d.spec.cluster.nodes]


RULES = (
    image_profile,
    effective_differs,
    engine_host,
    served_name_is_not_a_flag,
    served_aliases,
    api_port_is_a_port,
    ports_distinct,
    managed_flags,
    engine_args_parse,
    api_key,
    backend_supported,
    secrets_stay_secret,
    secret_names,
    env_values,
    env_overrides,
    image_pinned,
    memory_budget,
    launch_timeout_fits,
)
