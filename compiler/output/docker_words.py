"""A node's `docker run` words (NodePlan.docker_run) read back as typed parts, for targets other than ssh.

Other targets take every value from these words, not from the spec, so they run what the ssh target runs:
the same variables, mounts, devices and command. An option this module does not know is a bug (a new
option in compiler/resolve/containers.py that another target would silently drop): it raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.plan import Command, Words

# Options that say how docker itself runs the container, with nothing another runtime must reproduce:
# its name and labels (the ssh target's bookkeeping), detaching, and its log driver (Kubernetes' kubelet
# rotates container logs itself).
_DOCKER_ONLY = frozenset({"-d", "--name", "--label", "--log-driver", "--log-opt"})


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    readonly: bool


@dataclass(frozen=True)
class DockerRun:
    host_network: bool
    host_ipc: bool
    all_gpus: bool
    privileged: bool
    devices: tuple[str, ...]
    capabilities: tuple[str, ...]
    ulimits: tuple[tuple[str, str], ...]  # (limit, value) as docker's --ulimit reads them
    mounts: tuple[Mount, ...]
    env: tuple[tuple[str, str], ...]  # -e NAME=VALUE, in order
    passed: tuple[str, ...]  # -e NAME: the value comes from the caller's environment (secrets)
    entrypoint: str  # --entrypoint; "" keeps the image's own
    image: str
    args: tuple[str, ...]  # the words after the image


def read_docker_run(command: Command, image: str) -> DockerRun:
    """`command`'s parts; `image` is the plan's image, the word that ends docker's options."""
    groups = list(command)
    if not groups or groups[0] != ("docker", "run") or (image,) not in groups:
        raise ValueError(f"not a docker run of {image}: {command[:2]}")
    at = groups.index((image,))
    options, args = groups[1:at], groups[at + 1 :]
    found: dict[str, list[Words]] = {}
    for group in options:
        found.setdefault(group[0], []).append(group)
    unknown = set(found) - _DOCKER_ONLY - _READ
    if unknown:
        raise ValueError(f"docker run option(s) {sorted(unknown)} have no meaning here yet")

    def values(option: str) -> list[str]:
        return [g[1] for g in found.get(option, [])]

    env, passed = [], []
    for word in values("-e"):
        name, equals, value = word.partition("=")
        if equals:
            env.append((name, value))
        else:
            passed.append(name)
    entrypoints = values("--entrypoint")
    return DockerRun(
        host_network=values("--network") == ["host"],
        host_ipc=values("--ipc") == ["host"],
        all_gpus=values("--gpus") == ["all"],
        privileged="--privileged" in found,
        devices=tuple(values("--device")),
        capabilities=tuple(values("--cap-add")),
        ulimits=tuple((limit, value) for limit, _, value in (u.partition("=") for u in values("--ulimit"))),
        mounts=tuple(_mount(v) for v in values("-v")),
        env=tuple(env),
        passed=tuple(passed),
        entrypoint=entrypoints[0] if entrypoints else "",
        image=image,
        args=tuple(word for group in args for word in group),
    )


_READ = frozenset(
    {"--network", "--ipc", "--gpus", "--privileged", "--device", "--cap-add", "--ulimit", "-v", "-e", "--entrypoint"}
)


def _mount(word: str) -> Mount:
    host, container, *rest = word.split(":")
    return Mount(host, container, rest == ["ro"])
