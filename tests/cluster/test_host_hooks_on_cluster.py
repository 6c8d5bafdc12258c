"""cluster.hooks and bounded logs on the simulated cluster: each node's host runs the hooks over real
OpenSSH before its container starts, a failing one is named by node and command; real dockerd keeps
the containers' json-file logs bounded and `logs.sh --since` reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.specs import DELETE

pytestmark = pytest.mark.cluster

EXAMPLE = "qwen3-32b-2spark-hooks.yaml"


def test_hooks_run_on_every_host_and_logs_stay_bounded(deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    containers = "$(docker ps -q --filter label=sparkc.node | wc -l)"
    hook = f'echo "$(hostname) as $(id -un), no container yet: {containers}" >> {ran}'
    changes = {
        "container.image": VLLM_IMAGE,
        "container.hooks": DELETE,
        "cluster.hooks": {"pre_launch": [hook], "sudo": False},
        "container.logs": {"max_size": "1m", "max_file": 2},
    }
    d = deploy(EXAMPLE, "hosthooks", changes)
    launch = d.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ran.read_text().splitlines() == [f"{n} as root, no container yet: 0" for n in d.nodes]
    for n in d.nodes:
        shown = sim_cluster.docker(n, "inspect", "--format", "{{json .HostConfig.LogConfig}}", d.container(n)).stdout
        assert json.loads(shown) == {"Type": "json-file", "Config": {"max-file": "2", "max-size": "1m"}}
    gathered = tmp_path / "gathered"
    logs = d.run("logs.sh", "--since", "10m", "--out", str(gathered))
    assert logs.returncode == 0, logs.stderr
    assert all((gathered / f"{n}.log").read_text() for n in d.nodes)
    assert d.run("stop-cluster.sh").returncode == 0


def test_a_failing_hook_is_named_by_node_and_command(deploy: Deploy, sim_cluster: SimCluster) -> None:
    worker = sim_cluster.nodes[1].name
    failing = f'if [ "$(hostname)" = {worker} ]; then echo "clocks are locked" >&2; exit 4; fi'
    changes = {"container.image": VLLM_IMAGE, "container.hooks": DELETE, "cluster.hooks": {"pre_launch": [failing]}}
    d = deploy(EXAMPLE, "badhook", changes)
    launch = d.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 1
    assert f"FAILED in phase hooks on node {worker}" in launch.stderr, launch.stdout + launch.stderr
    assert f"host hook pre_launch[0] failed on {worker} with status 4: {failing}" in launch.stderr
    assert "clocks are locked" in launch.stderr
    assert not any(d.containers_on(n) for n in d.nodes)
