"""Two deployments side by side on the simulated cluster (examples/side-by-side/: a model across both nodes,
a small one beside it on the head), then a third that would not fit, refused at preflight with the numbers."""

from __future__ import annotations

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import ask
from tests.specs import DELETE

pytestmark = pytest.mark.cluster

BIG, SMALL = "side-by-side/llama33-70b-fp8-both.yaml", "side-by-side/qwen3-8b-beside.yaml"
# The sim's nodes inline instead of the example's cluster file (its addresses are the Sparks').
ON_SIM = {"container.image": VLLM_IMAGE, "cluster.file": DELETE}


def test_two_deployments_side_by_side_and_a_third_refused(deploy: Deploy, sim_cluster: SimCluster) -> None:
    big = deploy(BIG, "big", ON_SIM)
    small = deploy(SMALL, "small", ON_SIM, nodes=1)
    head = sim_cluster.head.name
    launched = big.run("launch-cluster.sh")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    # big's engine holds spark1's GPU: that is sparkc's own container, not a foreign program
    pid = sim_cluster.docker(head, "inspect", "--format", "{{.State.Pid}}", big.container(head), check=True).stdout
    sim_cluster.set_gpus(head, ["NVIDIA GB10"], [f"{pid.strip()}, python3"])
    try:
        launched = small.run("launch-cluster.sh")
        assert launched.returncode == 0, launched.stdout + launched.stderr
        assert f"{head}: small (41.6 GB) beside big 67.2 GB: 108.9 GB of 116.0 GB for engines" in launched.stdout
        assert ask(sim_cluster, 8000, "llama-3.3-70b")["choices"] and ask(sim_cluster, 8001, "qwen3-8b")["choices"]

        third = deploy(SMALL, "third", {**ON_SIM, "engine.port": 8002}, nodes=1)
        refused = third.run("launch-cluster.sh")
        said = refused.stdout + refused.stderr
        assert refused.returncode == 1, said
        assert f"{head} cannot hold third (41.6 GB) beside what runs there: " in said
        assert "big 67.2 GB" in said and "small 41.6 GB" in said
        assert "150.5 GB in all, more than the 116.0 GB it has for engines" in said
        assert "busy" not in said
        assert third.containers_on(head) == []  # refused before anything started
    finally:
        sim_cluster.reset_hardware(head)

    listed = big.run("status.sh", "--all")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    mgmt = sim_cluster.head.mgmt_ip
    assert rows["big"] == ["running", head, "spark2", f"http://{mgmt}:8000", "healthy"]
    assert rows["small"] == ["running", head, f"http://{mgmt}:8001", "healthy"]
