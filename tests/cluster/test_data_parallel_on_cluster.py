"""vLLM's multi-node data parallel on the simulated cluster: two replicas, one per node, the head serving the
API once the other node's headless engine has connected to its RPC port; a rank that dies before it is ready fails the
launch naming its node."""

from __future__ import annotations

import json

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import ask, assert_failed
from tests.specs import flag_value

pytestmark = pytest.mark.cluster

EXAMPLE = "qwen3-30b-a3b-2spark-dp-ep.yaml"
# The example on the simulated nodes: one GPU each, so one replica each; the session's model has no experts.
CHANGES = {"container.image": VLLM_IMAGE, "engine.tensor_parallel": 1, "model.architecture": {"attention_heads": 2}}


def _marker(cluster: SimCluster, node: str, container: str) -> dict[str, object]:
    logs = cluster.docker(node, "logs", container).stdout
    line = next(line for line in logs.splitlines() if line.startswith("SPARKC_STANDIN_DATA_PARALLEL "))
    return json.loads(line.split(" ", 1)[1])


def test_two_replicas_serve_from_the_head_once_the_headless_node_connects(
    deploy: Deploy, sim_cluster: SimCluster
) -> None:
    d = deploy(EXAMPLE, "dp", CHANGES)
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ask(sim_cluster, 8000, "qwen3-30b-a3b")["choices"]
    head, worker = d.standin_env("spark1")["argv"], d.standin_env("spark2")["argv"]
    assert "--headless" not in head and "--headless" in worker
    assert flag_value(worker, "--data-parallel-start-rank") == "1"
    assert flag_value(worker, "--data-parallel-address") == sim_cluster.head.fabric_ip
    # The headless engine reached the head's RPC port over the fabric, and the head counted its rank.
    assert _marker(sim_cluster, "spark1", d.container("spark1"))["ranks"] == [1]
    assert _marker(sim_cluster, "spark2", d.container("spark2"))["front_end"] == f"{sim_cluster.head.fabric_ip}:29550"
    assert d.run("status.sh").returncode == 0
    assert d.run("stop-cluster.sh").returncode == 0


def test_a_rank_that_dies_before_it_is_ready_fails_the_launch_on_its_node(deploy: Deploy) -> None:
    d = deploy(EXAMPLE, "dp-missing", {**CHANGES, "cluster.nodes.1.env": {"SPARKC_STANDIN_CRASH": "load"}})
    result = d.run("launch-cluster.sh")
    # The head waits for rank 1 without a timeout of its own and never answers; the launcher names the node.
    assert_failed(result, "spark2", "readiness", 120)
    assert "container sparkc-dp-missing-spark2 is exited" in result.stderr


def test_sglang_attention_data_parallel_over_two_nodes(deploy: Deploy, sim_cluster: SimCluster) -> None:
    changes = {"container.image": VLLM_IMAGE, "model.architecture": {"attention_heads": 2}}
    changes |= {"engine.tensor_parallel": 1, "engine.data_parallel": 2, "engine.expert_parallel": True}
    d = deploy("sglang-qwen3-30b-2spark.yaml", "sglang-dp", changes)
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ask(sim_cluster, 30000, "qwen3-30b")["choices"]
    worker = d.standin_env("spark2")["argv"]
    assert flag_value(worker, "--tp-size") == "2" and flag_value(worker, "--attn-dp-size") == "2"
    # The worker took node 0's scheduler ports on the rendezvous port + 13, which preflight kept free.
    logs = sim_cluster.docker("spark2", "logs", d.container("spark2")).stdout
    assert f'"handshake": "{sim_cluster.head.fabric_ip}:29514"' in logs
    assert d.run("stop-cluster.sh").returncode == 0
