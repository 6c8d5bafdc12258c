"""distribute.sh on the simulated cluster with the head's fabric link throttled (tc), image copies to
two workers: the chain (head -> spark2 -> spark3, each loading while passing on) against the star
(head -> each worker at once). Writes benchmarks/results/distribute-sim.json.

    flock /tmp/sparkc-simcluster.lock python benchmarks/distribute_chain.py [--rate 100mbit]

Root only (namespaces, dockerd, tc); brings the simulated cluster up and down itself.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcluster import NodeSpec, SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deployment, sim_spec
from tests.specs import DELETE

RESULTS = Path(__file__).resolve().parent / "results" / "distribute-sim.json"


def tc(cluster: SimCluster, *args: str) -> None:
    head = cluster.head
    cmd = ["ip", "netns", "exec", head.netns, "tc", "qdisc", *args[:1], "dev", head.fabric_netdev, *args[1:]]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def copy_round(cluster: SimCluster, d: Deployment, star: bool) -> dict[str, object]:
    for worker in ("spark2", "spark3"):
        cluster.break_remove_image(worker, VLLM_IMAGE)
    start = time.monotonic()
    run = d.run("distribute.sh", "--image-only", *(["--star"] if star else []), timeout=900)
    seconds = time.monotonic() - start
    if run.returncode != 0:
        raise SystemExit(run.stdout + run.stderr)
    lines = (d.build / "distribute-report.txt").read_text().splitlines()
    return {
        "mode": "star" if star else "chain",
        "wall_s": round(seconds, 1),
        "report": [dict(re.findall(r"(\w+)=(\S+)", line)) for line in lines],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", default="100mbit", help="the head's fabric egress limit (tc tbf rate)")
    args = parser.parse_args()
    cluster = SimCluster([NodeSpec("spark1"), NodeSpec("spark2"), NodeSpec("spark3")], name="sparkc-bench")
    cluster.up()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            model = Path(tmp) / "model"
            model.mkdir()
            (model / "config.json").write_text("{}")
            spec = sim_spec(
                cluster,
                "llama33-70b-2spark-native.yaml",
                "bench",
                3,
                model,
                {"container.image": VLLM_IMAGE, "model.architecture": DELETE},
            )
            d = Deployment(cluster, spec, Path(tmp) / "build")
            rounds = [copy_round(cluster, d, star=False)]  # unthrottled, for reference
            tc(cluster, "add", "root", "tbf", "rate", args.rate, "burst", "256kb", "latency", "400ms")
            try:
                rounds += [copy_round(cluster, d, star=True), copy_round(cluster, d, star=False)]
            finally:
                tc(cluster, "del", "root")
    finally:
        cluster.teardown()
    result = {
        "what": "distribute.sh --image-only to 2 workers on the simulated cluster (3 nodes, namespaces, "
        "one dockerd each); the head's fabric egress limited with tc tbf after the first round",
        "head_egress_limit": args.rate,
        "rounds": [{"throttled": i > 0, **r} for i, r in enumerate(rounds)],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
