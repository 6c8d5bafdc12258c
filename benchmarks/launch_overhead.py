"""The launcher's own time, per phase, with an engine that is ready at once, against the floor.

    flock /tmp/sparkc-simcluster.lock python benchmarks/launch_overhead.py [ROUNDS]

Needs root and the simulated cluster (simcluster). For 2 and 4 nodes: launch-cluster.sh from
start to READY, each output line time-stamped as it arrives (phase boundaries), then stop-cluster.sh.
The floor, measured the same way: one ssh round trip to every worker at once, then the same
`docker run`s (workers, then rank 0, as the launcher starts them) and curl until a one-token completion
answers. The launches run with --no-probe; one more launch per size times the fabric probe as well
("with_probe"). Writes benchmarks/results/launch_overhead.json.
"""

from __future__ import annotations

import re
import shlex
import statistics
import sys
import time

from simbench import deployment, model_dir, write

from simcluster import SimCluster
from tests.cluster.deployment import Deployment

STAMP = 'while IFS= read -r line; do printf "%s %s\\n" "$(date +%s.%N)" "$line"; done'


def timed_launch(d: Deployment, *flags: str) -> dict[str, float]:
    start = time.time()
    command = shlex.join(["bash", str(d.build / "launch-cluster.sh"), *flags])
    res = d.cluster.sh(d.cluster.head.name, f"{command} 2>&1 | {STAMP}", timeout=600)
    end = time.time()
    if "READY" not in res.stdout:
        raise SystemExit("launch failed:\n" + res.stdout + res.stderr)
    marks: list[tuple[str, float]] = []
    for line in res.stdout.splitlines():
        stamp, _, text = line.partition(" ")
        m = re.search(r"\[sparkc\] == ([a-z]+):", text)
        if m:
            marks.append((m.group(1), float(stamp)))
    phases = {
        name: round(marks[i + 1][1] - t if i + 1 < len(marks) else end - t, 3) for i, (name, t) in enumerate(marks)
    }
    phases["total"] = round(end - start, 3)
    return phases


def floor_script(d: Deployment) -> str:
    plan = d.manifest["plan"]
    lines = ["set -e", "t0=$(date +%s.%N)"]
    for node in plan["nodes"][1:]:
        opts = " ".join(shlex.quote(w) for w in [*d.cluster.ssh_options])
        lines.append(f"ssh {opts} {shlex.quote(node['ssh_target'])} true &")
    lines += ["wait", "t1=$(date +%s.%N)"]
    by_name = {n["name"]: n for n in plan["nodes"]}
    for wave in plan["start_waves"]:
        for name in wave:
            node = by_name[name]
            run = " ".join(shlex.quote(w) for group in node["docker_run"] for w in group)
            if node["ssh_target"]:
                opts = " ".join(shlex.quote(w) for w in d.cluster.ssh_options)
                lines.append(f"ssh {opts} {shlex.quote(node['ssh_target'])} {shlex.quote(run)} >/dev/null &")
            else:
                lines.append(f"{run} >/dev/null &")
        lines.append("wait")
    body = shlex.quote(plan_probe(plan))
    curl = f"curl -fsS -o /dev/null -H 'Content-Type: application/json' -d {body} {plan['probe_url']}/v1/completions"
    lines += [
        f"until {curl}; do sleep 0.1; done",
        't2=$(date +%s.%N); awk "BEGIN { print \\"ssh\\", $t1 - $t0, \\"total\\", $t2 - $t0 }"',
    ]
    return "\n".join(lines)


def plan_probe(plan: dict[str, object]) -> str:
    import json

    return json.dumps({"model": plan["served_model_name"], "prompt": "ping", "max_tokens": 1})


def timed_floor(d: Deployment) -> dict[str, float]:
    res = d.cluster.sh(d.cluster.head.name, floor_script(d), timeout=600)
    words = res.stdout.split()
    if res.returncode != 0 or len(words) < 4:
        raise SystemExit("floor run failed:\n" + res.stdout + res.stderr)
    return {"ssh_round_trip": float(words[1]), "total": float(words[3])}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cluster = SimCluster(4, name="sparkc-bench").up()
    model = model_dir()
    out: dict[str, object] = {
        "rounds": rounds,
        "command": "flock /tmp/sparkc-simcluster.lock python benchmarks/launch_overhead.py",
    }
    try:
        for n in (2, 4):
            d = deployment(cluster, model, n, f"bench{n}")
            launches, floors = [], []
            for _ in range(rounds):
                # The fabric probe (one all-reduce before the engine) is a check of its own, not overhead:
                # timed apart, once, below.
                launches.append(timed_launch(d, "--no-probe"))
                d.run("stop-cluster.sh", timeout=300)
                floors.append(timed_floor(d))
                d.remove()
            probed = timed_launch(d)
            d.run("stop-cluster.sh", timeout=300)
            d.remove()
            median = {k: round(statistics.median(r[k] for r in launches), 3) for k in launches[0]}
            floor = {k: round(statistics.median(r[k] for r in floors), 3) for k in floors[0]}
            out[f"{n}_nodes"] = {
                "launch": median,
                "floor": floor,
                "ratio": round(median["total"] / floor["total"], 2),
                "runs": launches,
                "with_probe": probed,
            }
            print(f"{n} nodes: launch {median} floor {floor} ratio {median['total'] / floor['total']:.2f}")
        out["4_vs_2"] = round(out["4_nodes"]["launch"]["total"] / out["2_nodes"]["launch"]["total"], 2)  # type: ignore[index]
        print("4 nodes / 2 nodes:", out["4_vs_2"], "->", write("launch_overhead", out))
    finally:
        cluster.teardown()


if __name__ == "__main__":
    main()
