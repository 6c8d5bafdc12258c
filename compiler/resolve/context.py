"""The deployment every rule and builder reads: the typed spec plus the decisions derived from it.

Deriving reports nothing: where the spec is wrong (an unknown head, a port that is no number) a
rule says so, and the builders never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from compiler.engines import Engine, engine_for
from compiler.engines.flag_table import Choice, FlagTable, choose
from compiler.resolve.entrypoint import Entrypoint, resolve_entrypoint
from compiler.spec.model_facts import NO_FACTS, ModelFacts
from compiler.spec.patches import PatchFolder
from compiler.spec.profiles import NcclRelease, Profile, RayPresence, find_profile, nccl_release, ray_presence
from compiler.spec.typed import Backend, Node, Spec, Topology

# Seconds the engine's own timeouts leave to the launcher, so the engine reports its failure first.
ENGINE_TIMEOUT_MARGIN = 60
# A package manager installing Ray: `pip install ray`, `pip3 install -U "ray[default]"`, `uv pip install ray==2.49`.
INSTALLS_RAY = re.compile(r"\b(pip3?|uv|conda|mamba)\b[^;&|]*\binstall\b[^;&|]*(?<![\w-])['\"]?ray(?![\w-])")

# A package manager installing OpenSSH's server: `apt-get install -y openssh-server`, `apk add openssh`.
INSTALLS_SSHD = re.compile(
    r"\b(apt-get|apt|dnf|yum|microdnf|apk|zypper|dpkg)\b[^;&|]*\s(install|add|-i)\b[^;&|]*\bopenssh(-server)?(?![A-Za-z-])"
)


@dataclass(frozen=True)
class Deployment:
    spec: Spec
    engine: Engine
    profile: Profile | None
    entrypoint: Entrypoint
    head_index: int  # position of the head in cluster.nodes (0 when cluster.head names no node)
    facts: ModelFacts = NO_FACTS  # what the compiling machine could read about the weights
    own_profiles: tuple[Profile, ...] = ()  # the operator's own image profiles
    patches: PatchFolder | None = None  # container.hooks.patches, as read beside the spec

    @property
    def head(self) -> Node:
        return self.spec.cluster.nodes[self.head_index]

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        """Head first (rank 0), then the workers in spec order (ranks 1..). In a ring the order of nodes is
        the cabling's, so the ranks go round it from the head: each rank's neighbours stay cabled to it."""
        nodes = self.spec.cluster.nodes
        if self.topology is Topology.RING:
            return nodes[self.head_index :] + nodes[: self.head_index]
        others = tuple(n for n in nodes if n.index != self.head_index)
        return (self.head, *others)

    @property
    def multi(self) -> bool:
        return len(self.spec.cluster.nodes) > 1

    @property
    def backend(self) -> Backend:
        # Data parallel runs in the engine's own multi-node mode: one engine per replica, started per node.
        if self.spec.engine.backend is None and self.spec.engine.data_parallel > 1:
            return Backend.NATIVE
        return self.spec.engine.backend or self.engine.default_backend(len(self.spec.cluster.nodes))

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.spec.cluster.nodes)

    @property
    def topology(self) -> Topology:
        return self.spec.cluster.topology or (Topology.DIRECT if len(self.spec.cluster.nodes) <= 2 else Topology.SWITCH)

    @property
    def ray_presence(self) -> RayPresence:
        """Whether the image has Ray, as its profile knows it for this tag (check: the launcher looks)."""
        return ray_presence(self.profile, self.spec.container.image) if self.profile else RayPresence.CHECK

    @property
    def nccl(self) -> NcclRelease | None:
        """The NCCL the image ships, as its profile knows it for this tag; None when unknown."""
        return nccl_release(self.profile, self.spec.container.image) if self.profile else None

    @property
    def hooks_install_ray(self) -> bool:
        """A pre_engine hook installs Ray (NVIDIA's playbook does, for images without it)."""
        hooks = self.spec.container.hooks
        return hooks is not None and any(INSTALLS_RAY.search(command) for command in hooks.pre_engine)

    @property
    def hooks_install_sshd(self) -> bool:
        """A pre_engine hook installs OpenSSH's server (NVIDIA's two-Spark playbook does, before mpirun)."""
        hooks = self.spec.container.hooks
        return hooks is not None and any(INSTALLS_SSHD.search(command) for command in hooks.pre_engine)

    @property
    def engine_timeout(self) -> int:
        return max(self.spec.launch.timeout - ENGINE_TIMEOUT_MARGIN, 30)

    @property
    def engine_timeout_margin(self) -> int:
        return ENGINE_TIMEOUT_MARGIN

    @property
    def nccl_check(self) -> bool:
        # A silent fallback to sockets only matters, and only shows, between nodes with RDMA devices.
        check = self.spec.launch.nccl_check
        if check is not None:
            return check
        engine = self.spec.engine
        if self.engine.replicas_whole_per_node and engine.data_parallel > 1 and not engine.expert_parallel:
            return False  # replicas whole on their nodes, no experts to exchange: no collective crosses the fabric
        return self.multi and any(n.fabric.hcas for n in self.spec.cluster.nodes)

    @property
    def probe(self) -> bool:
        # Only several nodes have a fabric to probe; a single node's engine finds its own GPU.
        probe = self.spec.launch.probe
        return probe if probe is not None else self.multi

    def value(self, setting: str) -> str:
        """The effective value of an entrypoint-controlled setting, as the engine will see it."""
        return self.entrypoint.value(setting)

    @property
    def served_model_name(self) -> str:
        return self.entrypoint.value("served_model_name")

    @property
    def engine_version(self) -> str | None:
        """The engine's release in the image, where its profile can read it from the tag."""
        if self.profile is None or self.profile.engine != self.spec.engine.kind:
            return None
        return self.profile.engine_version(self.spec.container.image)

    @cached_property
    def flag_choice(self) -> Choice:
        """The flag table engine.args are compared with, and whether what it refuses is an error."""
        return choose(self.spec.engine.kind, self.engine_version)

    @property
    def flag_table(self) -> FlagTable:
        """What that release's parser accepts (the newest table sparkc has where the release is unknown)."""
        return self.flag_choice.table

    @property
    def api_port(self) -> int | None:
        """The port the API really listens on; None when the image would be given something that is no port."""
        text = self.value("port")
        return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def derive(
    spec: Spec, facts: ModelFacts = NO_FACTS, profiles: tuple[Profile, ...] = (), patches: PatchFolder | None = None
) -> Deployment:
    """`facts`: what this machine could read about the weights; `profiles`: the operator's own image
    profiles, which win over the built-in ones; `patches`: container.hooks.patches as read beside the spec."""
    engine = engine_for(spec.engine.kind)
    profile = find_profile(spec.container.image, profiles)
    names = [n.name for n in spec.cluster.nodes]
    head_index = names.index(spec.cluster.head) if spec.cluster.head in names else 0
    entrypoint = resolve_entrypoint(spec, profile, engine.default_port, engine.kv_fraction(spec, facts))
    return Deployment(spec, engine, profile, entrypoint, head_index, facts, profiles, patches)
