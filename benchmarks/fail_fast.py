"""From a container dying to the launcher failing with logs saved.

    flock /tmp/sparkc-simcluster.lock python benchmarks/fail_fast.py [ROUNDS]

Needs root and the simulated cluster. Native 2-node launch whose head would load for 10 minutes; once
both ranks met (the launcher then waits for readiness), the worker's container is killed; the time
from the kill to the launcher's exit (after it gathered every node's logs) is the figure. Target: 5 s.
Writes benchmarks/results/fail_fast.json.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from simbench import deployment, model_dir, write

from simcluster import SimCluster


def one(cluster: SimCluster, model, i: int) -> float:
    d = deployment(cluster, model, 2, f"ff{i}", {"SPARKC_STANDIN_LOAD_SECONDS": "600"})
    ended: list[float] = []
    result: list[object] = []

    def launch() -> None:
        result.append(d.run("launch-cluster.sh", timeout=300))
        ended.append(time.monotonic())

    thread = threading.Thread(target=launch)
    thread.start()
    while "SPARKC_STANDIN_RENDEZVOUS" not in cluster.docker("spark1", "logs", d.container("spark1")).stdout:
        time.sleep(0.1)
    cluster.docker("spark2", "kill", d.container("spark2"), check=True)
    killed = time.monotonic()
    thread.join()
    assert "FAILED in phase readiness on node spark2" in result[0].stderr, result[0].stderr  # type: ignore[attr-defined]
    d.remove()
    return ended[0] - killed


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cluster = SimCluster(2, name="sparkc-bench").up()
    model = model_dir()
    try:
        samples = [round(one(cluster, model, i), 3) for i in range(rounds)]
    finally:
        cluster.teardown()
    out = {"seconds": samples, "median": statistics.median(samples), "max": max(samples), "target": 5.0,
           "command": "flock /tmp/sparkc-simcluster.lock python benchmarks/fail_fast.py"}  # fmt: skip
    print(out, "->", write("fail_fast", out))


if __name__ == "__main__":
    main()
