"""The launcher's preflight and its ssh use on the simulated cluster: one round trip per node over a
shared connection, the node's hardware (simcluster/hardware.py) judged, problems named by node."""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy, Deployment
from tests.cluster.test_launch_on_cluster import assert_failed
from tests.specs import DELETE

pytestmark = pytest.mark.cluster

HCAS = ("rocep1s0f1", "roceP2p1s0f1")


@pytest.fixture
def hardware(sim_cluster: SimCluster) -> Iterator[SimCluster]:
    """Both nodes get two active RDMA devices; everything is reset to one idle GPU, no RDMA afterwards."""
    for node in sim_cluster.nodes[:2]:
        for hca in HCAS:
            sim_cluster.set_hca(node.name, hca)
    yield sim_cluster
    for node in sim_cluster.nodes:
        sim_cluster.reset_hardware(node.name)


def rdma_deployment(deploy: Deploy, name: str, changes: dict[str, object] | None = None) -> Deployment:
    return deploy(
        "llama33-70b-2spark-native.yaml",
        name,
        {
            "container.image": VLLM_IMAGE,
            **{f"cluster.nodes.{i}.fabric.hcas": list(HCAS) for i in range(2)},
            **{f"cluster.nodes.{i}.fabric.transport": DELETE for i in range(2)},
            **(changes or {}),
        },
    )


def accepted_logins(cluster: SimCluster, node: str) -> int:
    return (cluster.node(node).dir / "sshd.log").read_text(errors="replace").count("Accepted publickey")


def table_row(output: str, node: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(node + " "))


def test_preflight_only_prints_a_table_node_by_node(deploy: Deploy, hardware: SimCluster) -> None:
    d = rdma_deployment(deploy, "pf-table")
    result = d.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 0, result.stdout + result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("NODE "))
    assert header.split()[:4] == ["NODE", "DOCKER", "IMAGE", "MODEL"]
    for node in ("spark1", "spark2"):
        row = table_row(result.stdout, node)
        assert row.endswith(" ok") and "2/2 active" in row and "1 idle" in row, row
        assert f"{hardware.node(node).fabric_ip}/24" in row
    assert d.containers_on("spark1") == [] and d.containers_on("spark2") == []  # nothing started

    hardware.set_gpus("spark2", [])
    failed = d.run("launch-cluster.sh", "--preflight-only")
    assert failed.returncode == 1
    assert table_row(failed.stdout, "spark1").endswith(" ok")
    assert table_row(failed.stdout, "spark2").endswith(" FAILED")
    assert "spark2: spark2 has 0 GPU(s), the spec says 1" in failed.stdout
    assert not d.saved_logs()  # only a check: nothing to gather


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("missing-hca", "RDMA device roceP2p1s0f1 does not exist on spark2 (it has: rocep1s0f1)"),
        ("port-down", "RDMA device rocep1s0f1 on spark2: port 1 is DOWN, not ACTIVE"),
        ("no-ipv4-gid", "RDMA device rocep1s0f1 on spark2 has no RoCE v2 GID for an IPv4 address"),
        ("no-dev-infiniband", "/dev/infiniband does not exist on spark2"),
        ("gpu-count", "spark2 has 0 GPU(s), the spec says 1"),
        ("gpu-busy", "the GPU of spark2 is busy: 4242, python3"),
    ],
)
def test_hardware_faults_fail_preflight_naming_the_node(
    deploy: Deploy, hardware: SimCluster, fault: str, expected: str
) -> None:
    d = rdma_deployment(deploy, f"pf-{fault}")
    n = hardware.node("spark2")
    if fault == "missing-hca":
        (n.dir / "run/sparkc-sim/hw/sys/class/infiniband/roceP2p1s0f1").rename(n.dir / "run/sparkc-sim/gone")
    elif fault == "port-down":
        hardware.set_hca("spark2", "rocep1s0f1", state="DOWN")
    elif fault == "no-ipv4-gid":
        hardware.set_hca("spark2", "rocep1s0f1", ipv4=None)
    elif fault == "no-dev-infiniband":
        (n.dir / "run/sparkc-sim/hw/dev/infiniband").rmdir()
    elif fault == "gpu-count":
        hardware.set_gpus("spark2", [])
    else:
        hardware.set_gpus("spark2", ["NVIDIA GB10"], ["4242, python3"])
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark2", "preflight", 60)
    assert expected in result.stderr, result.stderr
    assert all(d.containers_on(node) == [] for node in d.nodes)


def test_a_pinned_gid_index_that_is_no_roce_v2_ipv4_gid_fails_preflight(deploy: Deploy, hardware: SimCluster) -> None:
    d = rdma_deployment(deploy, "pf-gid", {"cluster.nodes.1.env": {"NCCL_IB_GID_INDEX": "5"}})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark2", "preflight", 60)
    assert "NCCL_IB_GID_INDEX=5, but the RoCE v2 IPv4 GID of rocep1s0f1 is at index 3" in result.stderr
    assert all(d.containers_on(node) == [] for node in d.nodes)
    pinned = rdma_deployment(deploy, "pf-gid-ok", {"cluster.nodes.1.env": {"NCCL_IB_GID_INDEX": "3"}})
    assert pinned.run("launch-cluster.sh", "--preflight-only").returncode == 0


def test_model_folder_differing_between_nodes_fails_preflight(
    deploy: Deploy, sim_cluster: SimCluster, sim_model_dir: Path, tmp_path: Path
) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "pf-model", {"container.image": VLLM_IMAGE})
    other = tmp_path / "other-model"  # spark2 sees another folder at the same path (its own mount)
    other.mkdir()
    (other / "config.json").write_text((sim_model_dir / "config.json").read_text() + " ")
    (other / "extra.safetensors").write_text("x")
    sim_cluster.exec("spark2", ["mount", "--bind", str(other), str(sim_model_dir)], check=True)
    try:
        result = d.run("launch-cluster.sh")
    finally:
        sim_cluster.exec("spark2", ["umount", str(sim_model_dir)], check=True)
    assert_failed(result, "spark2", "preflight", 60)
    assert f"model folder {sim_model_dir} on spark2 differs from spark1" in result.stderr
    size = (sim_model_dir / "config.json").stat().st_size
    assert f"config.json is {size} bytes on spark1, {size + 1} on spark2" in result.stderr
    assert "extra.safetensors only on spark2" in result.stderr


# -- ssh: one shared connection per node, nothing left behind ----------------------------------------


def leftovers(cluster: SimCluster, tmpdir: str) -> tuple[list[str], str]:
    ssh = cluster.exec(cluster.head.name, ["pgrep", "-af", f"ControlPath={tmpdir}"]).stdout.strip()
    return sorted(p.name for p in Path(tmpdir).iterdir()), ssh


def test_one_ssh_connection_per_node_and_no_sockets_left(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "mux", {"container.image": VLLM_IMAGE})
    tmpdir = tempfile.mkdtemp(prefix="mx", dir="/tmp")  # short: the launcher keeps its sockets under TMPDIR
    try:
        before = accepted_logins(sim_cluster, "spark2")
        launch = d.run("launch-cluster.sh", env={"TMPDIR": tmpdir})
        assert launch.returncode == 0, launch.stdout + launch.stderr
        # preflight, cleanup, start, readiness and the fabric check: dozens of ssh commands, few logins
        assert accepted_logins(sim_cluster, "spark2") - before <= 3
        assert leftovers(sim_cluster, tmpdir) == ([], "")
        for script in ("status.sh", "logs.sh", "stop-cluster.sh"):
            result = d.run(script, env={"TMPDIR": tmpdir})
            assert result.returncode == 0, script + result.stdout + result.stderr
            assert leftovers(sim_cluster, tmpdir) == ([], ""), script
    finally:
        subprocess.run(["rm", "-rf", tmpdir], check=False)


def test_the_users_own_control_master_setting_is_respected(deploy: Deploy, sim_cluster: SimCluster) -> None:
    options = ["LogLevel=ERROR", "ControlMaster=no"]
    d = deploy(
        "llama33-70b-2spark-native.yaml", "mux-user", {"container.image": VLLM_IMAGE, "cluster.ssh.options": options}
    )
    tmpdir = tempfile.mkdtemp(prefix="mx", dir="/tmp")
    try:
        before = accepted_logins(sim_cluster, "spark2")
        result = d.run("launch-cluster.sh", "--preflight-only", env={"TMPDIR": tmpdir})
        assert result.returncode == 0, result.stdout + result.stderr
        assert accepted_logins(sim_cluster, "spark2") - before == 1  # the one round trip, unshared
        assert sorted(Path(tmpdir).iterdir()) == []  # no folder of sockets made
    finally:
        subprocess.run(["rm", "-rf", tmpdir], check=False)


# -- fail fast: a container that dies ends the launch, naming it, while the others still load --------


def test_a_worker_killed_while_the_head_loads_ends_the_launch(deploy: Deploy, sim_cluster: SimCluster) -> None:
    """The head would load for 10 minutes; the launcher fails on the worker's death instead, names it
    (not the head, whose heartbeat makes it follow), and saves the logs."""
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "ff-worker",
        {"container.image": VLLM_IMAGE, "container.env": {"SPARKC_STANDIN_LOAD_SECONDS": "600"}},
    )
    results: list[subprocess.CompletedProcess[str]] = []
    launcher = threading.Thread(target=lambda: results.append(d.run("launch-cluster.sh", timeout=300)))
    launcher.start()
    try:
        for _ in range(600):  # until both ranks met: the launcher is then in its readiness wait
            logs = sim_cluster.docker("spark1", "logs", d.container("spark1")).stdout
            if "SPARKC_STANDIN_RENDEZVOUS" in logs:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the rendezvous never happened")
        sim_cluster.docker("spark2", "kill", d.container("spark2"), check=True)
    finally:
        launcher.join(timeout=300)
    (result,) = results
    assert_failed(result, "spark2", "readiness", 300)
    assert "container sparkc-ff-worker-spark2 is exited on spark2" in result.stderr
    saved = d.saved_logs()[-1]
    assert "status=exited" in (saved / "spark2.state").read_text()
    assert "SPARKC_STANDIN_RENDEZVOUS" in (saved / "spark1.log").read_text()


def test_page_cache_the_gpu_counts_as_used_is_reported_with_the_fix(deploy: Deploy, hardware: SimCluster) -> None:
    """MemAvailable says 120 GB, but 100 GB of it is page cache, which GB10's CUDA counts as used."""
    hardware.set_meminfo("spark2", total_gb=128, free_gb=20, cached_gb=100)
    d = rdma_deployment(deploy, "pf-cache")
    result = d.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "spark2 has 20.0G free and 100.0G in page cache of 128.0G" in result.stderr, result.stderr
    assert "set launch.drop_page_cache: true" in result.stderr
    assert re.search(r"^spark2 .* 20\.0G/128\.0G ", result.stdout, re.M), result.stdout
    dropped = rdma_deployment(deploy, "pf-cache-drop", {"launch.drop_page_cache": True})
    assert "page cache" not in dropped.run("launch-cluster.sh", "--preflight-only").stderr


def test_a_mount_source_missing_on_a_node_fails_preflight(deploy: Deploy, sim_cluster: SimCluster) -> None:
    source = "/run/sparkc-mount-source"  # each node has its own /run: only spark1 gets the folder
    sim_cluster.exec("spark1", ["mkdir", "-p", source], check=True)
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "pf-mount",
        {"container.image": VLLM_IMAGE, "container.mounts": [{"host": source, "container": "/extra"}]},
    )
    try:
        result = d.run("launch-cluster.sh")
        assert_failed(result, "spark2", "preflight", 60)
        assert f"mount source {source} does not exist on spark2" in result.stderr
        assert "does not exist on spark1" not in result.stderr
        assert sim_cluster.exec("spark2", ["test", "-e", source]).returncode == 1  # docker made nothing there
    finally:
        sim_cluster.exec("spark1", ["rm", "-rf", source])
