"""vLLM's start check of free memory on the simulated cluster: each node has its own /proc/meminfo (a GB10's after
boot unless a test lowers it), which the launcher's preflight reads on the node and the stand-in engine reads in
its container, both where the real one is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import assert_failed

pytestmark = pytest.mark.cluster

NATIVE = "llama33-70b-2spark-native.yaml"  # gpu_memory_utilization 0.8
# spark2 as if another program held memory: 92 of 121.69 GiB available; less vLLM's ~9 GiB init, 83 GiB,
# under the 0.8 x 121.69 = 97.35 GiB vLLM asks for. The largest fraction that starts: 83 / 121.69 = 0.68.
LOW = {"total_gb": 121.69, "free_gb": 90, "cached_gb": 2, "available_gb": 92}


@pytest.fixture
def low_memory(sim_cluster: SimCluster) -> Iterator[SimCluster]:
    sim_cluster.set_meminfo("spark2", **LOW)
    yield sim_cluster
    sim_cluster.reset_hardware("spark2")


def test_the_node_and_its_containers_see_the_nodes_meminfo(low_memory: SimCluster) -> None:
    node = low_memory.exec("spark2", ["grep", "MemAvailable", "/proc/meminfo"], check=True).stdout
    assert node.split()[1] == str(92 * 1024 * 1024)
    container = low_memory.docker("spark2", "run", "--rm", VLLM_IMAGE, "cat", "/proc/meminfo", check=True).stdout
    assert f"MemAvailable:{92 * 1024 * 1024:>16} kB" in container
    head = low_memory.docker("spark1", "run", "--rm", VLLM_IMAGE, "cat", "/proc/meminfo", check=True).stdout
    assert "MemAvailable:       122700000 kB" in head  # a GB10 after boot


def test_preflight_stops_a_launch_a_node_cannot_start_with_the_largest_fraction(
    deploy: Deploy, low_memory: SimCluster
) -> None:
    d = deploy(NATIVE, "mem-pf", {"container.image": VLLM_IMAGE})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark2", "preflight", 60)
    assert "spark2 has 92.0 of 121.6 GiB of memory available, and vLLM would refuse to start" in result.stderr
    assert "set engine.gpu_memory_utilization to at most 0.68" in result.stderr
    assert "spark1 has" not in result.stderr
    assert d.containers_on("spark1") == [] and d.containers_on("spark2") == []


def test_the_engine_itself_refuses_as_vllm_does_when_preflight_is_skipped(
    deploy: Deploy, low_memory: SimCluster
) -> None:
    d = deploy(NATIVE, "mem-engine", {"container.image": VLLM_IMAGE})
    result = d.run("launch-cluster.sh", "--skip-preflight", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    logs = low_memory.docker("spark2", "logs", d.container("spark2")).stderr
    assert (
        "ValueError: Free memory on device cuda:0 (83.00/121.69 GiB) on startup is less than desired GPU memory "
        "utilization (0.8, 97.35 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    ) in logs
    # the head had a GB10's memory after boot: its own check passed
    assert "Free memory on device" not in low_memory.docker("spark1", "logs", d.container("spark1")).stderr
