"""The resolved plan: every value concrete, with where it came from. Frozen; the templates only read it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One resolved value and its provenance: spec, default, profile or derived."""

    name: str
    value: str
    source: str
    why: str = ""


@dataclass(frozen=True)
class Effective:
    """What the spec asked for against what will really happen (entrypoints can disagree)."""

    setting: str
    requested: str
    effective: str
    reason: str = ""

    @property
    def differs(self) -> bool:
        return self.requested != self.effective


@dataclass(frozen=True)
class NodePlan:
    name: str
    role: str  # head | worker
    rank: int  # head is 0; workers 1.. in spec order
    ssh_target: str  # user@host, or "" when the node is the head (commands run locally)
    fabric_ip: str
    netdev: str
    hcas: tuple[str, ...]
    gpus: int
    container: str
    env: tuple[Setting, ...]  # sorted by name
    docker_run: tuple[str, ...]  # the whole `docker run ...` argv
    nccl_transport: str  # what NCCL must report in this node's log: IB, Socket, or "" (not checked here)


@dataclass(frozen=True)
class ProfileCheck:
    """What the launcher confirms about the image at run time (docker image inspect on the head)."""

    entrypoint_json: str  # as docker prints {{json .Config.Entrypoint}}; "" when the profile does not pin it
    # keep only: NAME=VALUE the plan assumed for each variable the entrypoint reads; the image must not
    # bake another value (adapt sets them all, bypass does not run the entrypoint)
    env_defaults: tuple[str, ...]
    fatal: bool  # keep/adapt rely on the profile: a mismatch stops the launch; bypass only warns


@dataclass(frozen=True)
class Plan:
    sparkc_version: str
    spec_path: str
    spec_sha256: str
    name: str
    engine: str  # vllm | sglang
    backend: str  # ray | native (single-node runs are native with one node)
    image: str
    profile: str  # profile id, "" when unknown
    entrypoint_mode: str  # bypass | adapt | keep (auto already decided)
    head: str
    nodes: tuple[NodePlan, ...]  # head first, then workers in spec order
    start_waves: tuple[tuple[str, ...], ...]  # containers started together, wave after wave
    engine_exec: tuple[str, ...]  # Ray: `docker exec ...` argv run on the head after Ray formed; else ()
    api_port: int  # effective
    probe_host: str  # where the launcher on the head reaches the API
    endpoint_host: str  # what to tell the operator
    served_model_name: str  # effective
    model_host_path: str
    ray_port: int
    master_port: int
    ray_required: bool  # preflight checks the image for ray
    ray_expected_ips: tuple[str, ...]
    total_gpus: int
    nccl_check: bool  # the launcher reads NCCL's transport lines after readiness
    head_ports: tuple[str, ...]  # "PORT what" for each port that must be free on the head
    launch_timeout: int
    engine_timeout: int
    ssh_options: tuple[str, ...]
    secrets: tuple[str, ...]
    effective: tuple[Effective, ...]
    quirks: tuple[str, ...]  # what the profile told us and how it was applied
    settings: tuple[Setting, ...]  # cluster-wide resolved values, for explain and the manifest
    profile_check: ProfileCheck

    @property
    def head_node(self) -> NodePlan:
        return next(n for n in self.nodes if n.name == self.head)

    @property
    def workers(self) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.role == "worker")
