"""Resolve a validated spec into a Plan: every node, NCCL, Ray and engine setting.

Pure: no disk, no YAML. Three steps in one direction: derive the deployment (decisions only), run
every rule (diagnostics only, all of them), and build the plan when no rule found an error. Rules
report against paths into the spec, so cross-field problems get a line and column too.
"""

from __future__ import annotations

from compiler.diagnostics import Diagnostic, has_errors
from compiler.plan import Plan
from compiler.resolve.build import build_plan
from compiler.resolve.context import derive
from compiler.resolve.rules import cluster as rules_cluster
from compiler.resolve.rules import engine as rules_engine
from compiler.resolve.rules import hooks as rules_hooks
from compiler.resolve.rules import host_paths as rules_host_paths
from compiler.resolve.rules import lengths as rules_lengths
from compiler.resolve.rules import model as rules_model
from compiler.resolve.rules import mounts as rules_mounts
from compiler.resolve.rules import mpi as rules_mpi
from compiler.resolve.rules import ssh as rules_ssh
from compiler.resolve.rules import topology as rules_topology
from compiler.resolve.rules import transport as rules_transport
from compiler.spec.model_facts import NO_FACTS, ModelFacts
from compiler.spec.patches import PatchFolder
from compiler.spec.profiles import Profile
from compiler.spec.typed import Spec

RULES = (
    rules_cluster.RULES
    + rules_topology.RULES
    + rules_transport.RULES
    + rules_ssh.RULES
    + rules_engine.RULES
    + rules_model.RULES
    + rules_lengths.RULES
    + rules_mounts.RULES
    + rules_host_paths.RULES
    + rules_hooks.RULES
    + rules_mpi.RULES
)


def resolve(
    spec: Spec,
    *,
    spec_path: str,
    spec_sha256: str,
    facts: ModelFacts = NO_FACTS,
    profiles: tuple[Profile, ...] = (),
    patches: PatchFolder | None = None,
) -> tuple[Plan | None, list[Diagnostic]]:
    deployment = derive(spec, facts, profiles, patches)
    # A rule may find one cluster-wide problem several times (once per node): report it once.
    diagnostics = list(dict.fromkeys(d for rule in RULES for d in rule(deployment)))
    if has_errors(diagnostics):
        return None, diagnostics
    return build_plan(deployment, spec_path, spec_sha256), diagnostics
