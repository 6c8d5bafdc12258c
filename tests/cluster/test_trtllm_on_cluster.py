"""TensorRT-LLM on two simulated nodes: sshd in each container, real Open MPI's mpirun in the head's starting
the TensorRT-LLM stand-in on both (trtllm-llmapi-launch, then trtllm-serve on rank 0), the endpoint ready;
a rank mpirun cannot reach, named in the launch's mpi phase; and the image without sshd (as NGC ships it:
NVIDIA's playbook installs openssh-server first) stopped at preflight with the fix named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simcluster import SimCluster
from simcluster.images import TRTLLM_IMAGE, TRTLLM_SSHD_IMAGE
from simcluster.standin.log import START_FILES
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import ask, assert_failed

pytestmark = pytest.mark.cluster

EXAMPLE = "trtllm-qwen3-235b-2spark-mpi.yaml"


def changes(cluster: SimCluster, image: str = TRTLLM_SSHD_IMAGE) -> dict[str, Any]:
    """The example on spark1 and spark3, whose fabric netdev differs from the head's; the image built FROM
    the TensorRT-LLM one with openssh-server installed."""
    worker = cluster.nodes[2]
    return {
        "container.image": image,
        "model.architecture": {"attention_heads": 6, "kv_heads": 6},
        "model.size_gb": 1,
        "cluster.nodes.1": {
            "name": worker.name,
            "ssh": worker.mgmt_ip,
            "fabric": {"ip": worker.fabric_ip, "netdev": worker.fabric_netdev, "transport": "sockets"},
        },
    }


def rank_envs(cluster: SimCluster, containers: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each rank's environment by hostname, as the stand-in recorded it in its own container (the copy it prints
    goes through mpirun's output forwarding, which cuts long lines and interleaves the ranks' pieces)."""
    lines = []
    for node, container in containers.items():
        read = cluster.docker(node, "exec", container, "sh", "-c", f"cat {START_FILES}*.json")
        lines += [json.loads(line) for line in read.stdout.splitlines() if line.strip()]
    return {line["hostname"]: line for line in lines if line["argv"][0] == "trtllm-llmapi-launch"}


def test_trtllm_on_two_nodes_under_mpirun_becomes_ready(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(EXAMPLE, "trt", changes(sim_cluster))
    launch = d.run("launch-cluster.sh", timeout=240)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "== mpi done" in launch.stdout and "mpirun reaches node rank 1 at 10.78.0.13:2233" in launch.stdout
    assert "image has /usr/sbin/sshd for mpirun" in launch.stdout
    # mpirun forwards the remote rank's output to the head's container: the worker's log has sshd's only.
    assert "no NCCL transport lines" not in launch.stderr, launch.stderr
    served = d.manifest["plan"]["served_model_name"]
    assert served == d.spec["model"]["path"].rsplit("/", 1)[1]  # trtllm-serve names a folder after itself
    assert ask(sim_cluster, 8355, served)["choices"]
    ranks = rank_envs(sim_cluster, {node: d.container(node) for node in ("spark1", "spark3")})
    assert set(ranks) == {"spark1", "spark3"}  # one rank in each node's container
    worker = ranks["spark3"]["env"]
    # The worker's rank has its own container's settings (through sshd), not the head's.
    assert worker["UCX_NET_DEVICES"] == worker["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0"
    assert ranks["spark1"]["env"]["UCX_NET_DEVICES"] == "enp1s0f1np1"
    assert worker["OMPI_COMM_WORLD_SIZE"] == "2" and worker["OMPI_COMM_WORLD_RANK"] == "1"
    assert d.run("status.sh").returncode == 0
    assert d.run("stop-cluster.sh").returncode == 0


def test_a_rank_mpirun_cannot_reach_fails_in_the_mpi_phase_naming_it(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(EXAMPLE, "trt-cut", changes(sim_cluster))
    block = ["iptables", "-I", "INPUT", "-p", "tcp", "--dport", "2233", "-j", "REJECT", "--reject-with", "tcp-reset"]
    sim_cluster.exec("spark3", block, check=True)
    try:
        launch = d.run("launch-cluster.sh", timeout=240)
    finally:
        sim_cluster.exec("spark3", ["iptables", "-D", *block[2:]], check=True)
    assert_failed(launch, "spark3", "mpi", budget=120)
    assert "node rank 1 (spark3) cannot be reached by mpirun" in launch.stderr
    assert "10.78.0.13 port 2233" in launch.stderr


def test_an_image_without_sshd_stops_at_preflight_naming_the_fix(deploy: Deploy, sim_cluster: SimCluster) -> None:
    """Without sshd every container's main process exits at start (mpi-sshd.sh, status 127): preflight looks in
    the image first, in a throwaway container on the head, and names the two fixes."""
    d = deploy(EXAMPLE, "trt-nosshd", changes(sim_cluster, TRTLLM_IMAGE))
    launch = d.run("launch-cluster.sh", timeout=120)
    assert_failed(launch, "spark1", "preflight", budget=60)
    shown = " ".join(launch.stderr.split())
    assert f"image {TRTLLM_IMAGE} has no OpenSSH (sshd missing)" in shown, shown
    assert "container.hooks.pre_engine command such as 'apt-get update && apt-get install -y openssh-server'" in shown
    assert f"an image built FROM {TRTLLM_IMAGE} with openssh-server installed" in shown
    assert not any(sim_cluster.docker(node, "ps", "-aq").stdout.strip() for node in ("spark1", "spark3"))
    # What preflight spares the operator: the container itself exits at once.
    run = sim_cluster.docker("spark1", "run", "--rm", "--entrypoint", "sh", TRTLLM_IMAGE, "-c", "command -v sshd")
    assert run.returncode != 0 and not run.stdout.strip(), run.stdout


def test_a_hook_that_installs_sshd_gets_past_preflight_and_runs_in_every_container(
    deploy: Deploy, sim_cluster: SimCluster
) -> None:
    """NVIDIA's playbook installs openssh-server at start: preflight then only notes the image's lack, and the
    hook runs in every container before sshd. The simulated nodes, like a Spark without a package mirror,
    cannot install it: the hook fails there and the launch names it."""
    hook = "apt-get install -y openssh-server"
    d = deploy(EXAMPLE, "trt-hook", {**changes(sim_cluster, TRTLLM_IMAGE), "container.hooks": {"pre_engine": [hook]}})
    launch = d.run("launch-cluster.sh", "--no-probe", timeout=180)  # the probe's container runs no hooks
    assert "image has no sshd: container.hooks.pre_engine installs OpenSSH" in launch.stdout, launch.stdout
    assert launch.returncode == 1, launch.stdout + launch.stderr
    shown = " ".join(launch.stderr.split())
    assert f"hook pre_engine[0] failed with status 100: {hook}" in shown, shown
