"""The control/data, hooks and API-key examples on the simulated cluster: what each worker's engine ran
with, the hooks' output in the container logs, a failing hook named by the launch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.specs import DELETE, EXAMPLES, flag_value

pytestmark = pytest.mark.cluster


def test_control_data_example_puts_each_plane_on_its_netdev(deploy: Deploy, sim_cluster: SimCluster) -> None:
    nodes = sim_cluster.nodes[:2]
    planes = {}
    for i, n in enumerate(nodes):
        planes[f"cluster.nodes.{i}.control"] = {"netdev": "mgmt0", "ip": n.mgmt_ip}
        planes[f"cluster.nodes.{i}.fabric.netdevs"] = [n.fabric_netdev]
    d = deploy("qwen3-32b-2spark-control-data.yaml", "planes", {"container.image": VLLM_IMAGE, **planes})
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    for n in nodes:
        seen = d.standin_env(n.name)
        env = seen["env"]
        assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "mgmt0"
        assert env["NCCL_SOCKET_IFNAME"] == env["OMPI_MCA_btl_tcp_if_include"] == n.fabric_netdev
        assert env["VLLM_HOST_IP"] == n.mgmt_ip and env["MASTER_ADDR"] == nodes[0].mgmt_ip
        assert flag_value(seen["argv"], "--master-addr") == nodes[0].mgmt_ip
    # Preflight's line for the node names both planes as it found them.
    preflight = next(line for line in launch.stdout.splitlines() if f"[sparkc] {nodes[1].name}: docker " in line)
    assert f"control {nodes[1].mgmt_ip} on mgmt0, data on {nodes[1].fabric_netdev}" in preflight
    assert d.run("stop-cluster.sh").returncode == 0


def test_control_ip_not_on_the_control_netdev_fails_preflight(deploy: Deploy, sim_cluster: SimCluster) -> None:
    nodes = sim_cluster.nodes[:2]
    planes = {
        "cluster.nodes.0.control": {"netdev": "mgmt0", "ip": nodes[0].mgmt_ip},
        "cluster.nodes.1.control": {"netdev": "mgmt0", "ip": "10.77.0.250"},  # on no interface of spark2
    }
    d = deploy("qwen3-32b-2spark-control-data.yaml", "badplanes", {"container.image": VLLM_IMAGE, **planes})
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 1
    assert f"FAILED in phase preflight on node {nodes[1].name}" in launch.stderr, launch.stdout + launch.stderr
    assert "is not an address of mgmt0" in launch.stderr


def patches_beside_the_spec(spec_folder: Path) -> str:
    """The example's patch folder copied beside the spec (deploy writes it into tmp_path): a spec names
    its patches by a path inside its own folder."""
    shutil.copytree(EXAMPLES / "patches" / "qwen3-fix", spec_folder / "patches" / "qwen3-fix", dirs_exist_ok=True)
    return "patches/qwen3-fix"


def test_hooks_example_runs_hooks_in_every_container(deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path) -> None:
    hooks = ['echo "hook saw $(cat /sparkc/patches/gb10-tuning.patch | wc -l) line(s) on $(hostname)"']
    d = deploy(
        "qwen3-32b-2spark-hooks.yaml",
        "hooks",
        {
            "cluster.hooks": DELETE,  # the example's host hook caps a real GPU's clock by sudo: none here
            "container.image": VLLM_IMAGE,
            "container.hooks.pre_engine": hooks,
            "container.hooks.patches": patches_beside_the_spec(tmp_path),
        },
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    gathered = tmp_path / "gathered"
    assert d.run("logs.sh", "--out", str(gathered)).returncode == 0
    for n in d.nodes:
        log = (gathered / f"{n}.log").read_text()
        assert f"hook saw 1 line(s) on {n}" in log and "sparkc: hooks done" in log
    assert d.run("stop-cluster.sh").returncode == 0


def test_a_failing_hook_fails_the_launch_naming_node_and_hook(
    deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    failing = '[ "$(hostname)" != spark2 ]'
    d = deploy(
        "qwen3-32b-2spark-hooks.yaml",
        "badhook",
        {
            "cluster.hooks": DELETE,
            "container.image": VLLM_IMAGE,
            "container.hooks.pre_engine": ["true", failing],
            "container.hooks.patches": patches_beside_the_spec(tmp_path),
        },
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 1, launch.stdout + launch.stderr
    assert "on node spark2" in launch.stderr
    assert f"hook pre_engine[1] failed with status 1: {failing}" in launch.stderr


def test_api_key_example_guards_v1(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(
        "solo-qwen3-32b-api-key.yaml",
        "keyex",
        {"container.image": VLLM_IMAGE, "container.secrets": ["VLLM_API_KEY"]},
        nodes=1,
    )
    launch = d.run("launch-cluster.sh", env={"VLLM_API_KEY": "sk-sim-key"})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert d.standin_env(d.nodes[0])["env"]["VLLM_API_KEY"] == "sk-sim-key"
    port = d.manifest["plan"]["api_port"]
    denied = sim_cluster.exec(
        sim_cluster.head.name,
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/v1/models"],
    )
    assert denied.stdout == "401"
    assert d.run("stop-cluster.sh").returncode == 0
