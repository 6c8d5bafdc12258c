"""deployment.sh's `docker run` words: what every node's container has once, then each node's own, and the
fabric probe's words built from the container's (not a second copy)."""

from __future__ import annotations

from collections.abc import Iterable

from compiler.output.bash_constants import Constant, Entry, port_places
from compiler.output.bash_words import SplitRuns, split_runs
from compiler.plan import Command, NodePlan, Plan


def runs(plan: Plan) -> list[Entry]:
    """The containers' and the probes' `docker run` words: what every node's has once, then each node's own."""
    nodes = plan.nodes
    runs = split_runs((n.docker_run for n in nodes), plan.image)
    e: list[Entry] = [
        Constant(
            "SPARKC_PROBE",
            plan.probe,
            "The fabric probe before the engine starts: one all-reduce across the nodes (--no-probe turns it off).",
            mutable=True,
        ),
        Constant("SPARKC_PROBE_PORT", plan.probe_port),
        Constant("SPARKC_PROBE_TIMEOUT", plan.probe_timeout),
        Constant(
            "SPARKC_DOCKER_RUN_SHARED",
            runs.shared,
            "Each node's container: `docker run` with these words, then the node's own below, as executed.",
            command=True,
            by_name=True,
        ),
        _sections("SPARKC_DOCKER_RUN_NODES", runs.own, [_describe(n) for n in nodes]),
        Constant(
            "SPARKC_DOCKER_RUN_AT",
            dict(zip((n.name for n in nodes), runs.spans, strict=True)),
            "Where each node's words start in SPARKC_DOCKER_RUN_NODES, and how many they are.",
            by_name=True,
        ),
        Constant(
            "SPARKC_API_PORT_AT",
            {n.name: port_places(n.api_port_words, _runpositions(runs, i, n.docker_run)) for i, n in enumerate(nodes)},
            "Where each node's words carry the API's port: INDEX:PREFIX items, the words --port rewrites.",
        ),
    ]
    if plan.probe:
        e += _probe(plan, runs)
    return e


def _runpositions(runs: SplitRuns, node: int, command: Command) -> dict[tuple[int, int], int]:
    return {(g, w): runs.position(node, g, w) for g, group in enumerate(command) for w in range(len(group))}


def _describe(n: NodePlan) -> str:
    rdma = f", RDMA {','.join(n.hcas)}" if n.hcas else ", no RDMA"
    return f"{n.name}: {n.role} rank {n.rank}, fabric {n.fabric_ip} on {n.netdev}{rdma}, {n.gpus} GPU(s)"


def _sections(name: str, own: Iterable[Command], notes: list[str], why: str = "") -> Constant:
    """Each node's own groups one after another, a note before its first group."""
    groups: list[tuple[str, ...]] = []
    at: dict[int, str] = {}
    for note, command in zip(notes, own, strict=True):
        at[len(groups)] = note
        groups += command
    return Constant(name, tuple(groups), why, command=True, by_name=True, notes=at)


def _probe(plan: Plan, runs: SplitRuns) -> list[Entry]:
    """The probe's words, from the container's: SPARKC_DOCKER_RUN_SHARED less the words at
    SPARKC_PROBE_RUN_SKIP, then what every probe adds (SPARKC_PROBE_RUN_SHARED), then each node's own."""
    shared = list(runs.shared)
    probes = [list(n.probe_run) for n in plan.nodes]
    kept = [g for g in shared if all(g in p for p in probes)]
    skip: list[int] = []
    i = 0
    for group in shared:
        if group not in kept:
            skip += range(i, i + len(group))
        i += len(group)
    extras = [[g for g in p if g not in kept] for p in probes]
    image = (plan.image,)
    options = [x[: x.index(image)] for x in extras]
    common = [g for g in options[0] if all(g in o for o in options[1:])]
    own = [tuple(g for g in x if g not in common) for x in extras]
    spans, start = {}, 0
    for n, groups in zip(plan.nodes, own, strict=True):
        count = sum(len(g) for g in groups)
        spans[n.name] = f"{start} {count}"
        start += count
    places: dict[str, str | int | bool] = {}
    for n, groups in zip(plan.nodes, own, strict=True):
        run = [*kept, *common, *groups]  # as compiled_run joins them
        starts = [sum(len(g) for g in run[:k]) for k in range(len(run))]
        at = {(i, w): starts[run.index(g)] + w for i, g in enumerate(n.probe_run) for w in range(len(g))}
        places[n.name] = port_places(n.probe_api_port_words, at)
    return [
        Constant(
            "SPARKC_PROBE_RUN_SKIP",
            " ".join(map(str, skip)),
            "Each node's probe: SPARKC_DOCKER_RUN_SHARED less the words at these indices, those below,"
            " python3 -c PROGRAM.",
        ),
        Constant("SPARKC_PROBE_RUN_SHARED", tuple(common), command=True, by_name=True),
        _sections("SPARKC_PROBE_RUN_NODES", own, [n.name for n in plan.nodes]),
        Constant(
            "SPARKC_PROBE_RUN_AT",
            spans,
            "Where each node's words start in SPARKC_PROBE_RUN_NODES, and how many they are.",
            by_name=True,
        ),
        Constant(
            "SPARKC_PROBE_API_PORT_AT",
            places,
            "Where each node's probe words carry the API's port, as SPARKC_API_PORT_AT.",
        ),
    ]
