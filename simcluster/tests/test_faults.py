"""Fault helpers of the simulated cluster and the stand-in's failure behaviour."""

from __future__ import annotations

import pytest

from simcluster import NORAY_IMAGE, VLLM_IMAGE, SimCluster
from simcluster.fixtures import MODEL_IN_CONTAINER, Runner, wait_until
from simcluster.hardware import VLLM_FITS

pytestmark = pytest.mark.cluster


def _health(cluster: SimCluster, node: str, ip: str, port: int) -> bool:
    return cluster.exec(node, ["curl", "-sf", f"http://{ip}:{port}/health"], timeout=10).returncode == 0


def test_break_and_restore_sshd(sim_cluster: SimCluster) -> None:
    sim_cluster.break_sshd("spark2")
    try:
        res = sim_cluster.ssh("spark1", "spark2", "true", timeout=20)
        assert res.returncode == 255
        assert "Connection refused" in res.stderr
    finally:
        sim_cluster.restore_sshd("spark2")
    assert sim_cluster.ssh("spark1", "spark2", "hostname", check=True).stdout.strip() == "spark2"


def test_swapped_and_removed_images(sim_cluster: SimCluster) -> None:
    good = sim_cluster.image_id("spark1", NORAY_IMAGE)
    try:
        swapped = sim_cluster.break_swap_image("spark3", NORAY_IMAGE)
        assert swapped != good
        assert sim_cluster.image_id("spark3", NORAY_IMAGE) == swapped
        sim_cluster.break_remove_image("spark3", NORAY_IMAGE)
        assert sim_cluster.image_id("spark3", NORAY_IMAGE) is None
    finally:
        sim_cluster.load_images([NORAY_IMAGE], ["spark3"])
    assert sim_cluster.image_id("spark3", NORAY_IMAGE) == good


def test_occupied_port_makes_the_engine_exit(sim_cluster: SimCluster, run_container: Runner) -> None:
    blocker = sim_cluster.break_occupy_port("spark2", 8200)
    try:
        c = run_container("spark2", VLLM_IMAGE, ["vllm", "serve", MODEL_IN_CONTAINER, *VLLM_FITS, "--port", "8200"])
        assert c.wait_exit(30) == 1
        assert "address already in use" in c.logs()
    finally:
        blocker.release()


def test_fabric_link_down_is_visible(sim_cluster: SimCluster) -> None:
    node = sim_cluster.node("spark2")

    def reachable() -> bool:  # sshd listens on every address of the node, the fabric one included
        probe = f"timeout 2 bash -c '</dev/tcp/{node.fabric_ip}/22'"
        return sim_cluster.exec("spark1", ["bash", "-c", probe], timeout=10).returncode == 0

    assert reachable()
    sim_cluster.break_fabric(node)
    try:
        assert not reachable()
    finally:
        sim_cluster.restore_fabric(node)
    wait_until(reachable, 10, "the fabric link to come back")


def test_crash_during_load(sim_cluster: SimCluster, run_container: Runner) -> None:
    c = run_container(
        "spark2", VLLM_IMAGE, ["vllm", "serve", MODEL_IN_CONTAINER, *VLLM_FITS], env={"SPARKC_STANDIN_CRASH": "load"}
    )
    assert c.wait_exit(30) == 1
    logs = c.logs()
    assert "Traceback (most recent call last)" in logs and "simulated crash" in logs


def test_missing_model_and_missing_gpus(sim_cluster: SimCluster, run_container: Runner) -> None:
    c = run_container("spark2", VLLM_IMAGE, ["vllm", "serve", "/models/absent", *VLLM_FITS])
    assert c.wait_exit(30) == 1
    assert "Invalid repository ID or local directory specified: '/models/absent'" in c.logs()
    g = run_container("spark2", VLLM_IMAGE, ["vllm", "serve", MODEL_IN_CONTAINER, *VLLM_FITS], gpus=False)
    assert g.wait_exit(30) == 1
    assert "No CUDA GPUs are available" in g.logs()


def test_image_without_ray(sim_cluster: SimCluster, run_container: Runner) -> None:
    res = sim_cluster.docker("spark2", "run", "--rm", NORAY_IMAGE, "ray", "--version")
    assert res.returncode != 0
    assert "executable file not found" in res.stderr
    c = run_container(
        "spark2",
        NORAY_IMAGE,
        [
            "vllm",
            "serve",
            MODEL_IN_CONTAINER,
            *VLLM_FITS,
            "--tensor-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
        ],
    )
    assert c.wait_exit(30) == 1
    assert "Failed to import Ray" in c.logs()


def test_sglang_two_nodes(sim_cluster: SimCluster, run_container: Runner) -> None:
    head, worker = sim_cluster.head, sim_cluster.node("spark3")
    common = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        MODEL_IN_CONTAINER,
        "--served-model-name",
        "tiny",
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--dist-init-addr",
        f"{head.fabric_ip}:20000",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--dist-timeout",
        "30",
    ]
    run_container(
        worker.name,
        VLLM_IMAGE,
        [*common, "--node-rank", "1"],
        env={"GLOO_SOCKET_IFNAME": worker.fabric_netdev},
        via_ssh=True,
    )
    h = run_container(
        head.name, VLLM_IMAGE, [*common, "--node-rank", "0"], env={"GLOO_SOCKET_IFNAME": head.fabric_netdev}
    )
    wait_until(
        lambda: _health(sim_cluster, head.name, head.fabric_ip, 30000),
        60,
        f"SGLang rank 0 /health; logs:\n{h.logs()}",
    )
    # Rank 1 answers /health only (a dummy, as in SGLang); the API lives on rank 0.
    assert _health(sim_cluster, head.name, worker.fabric_ip, 30000)
    res = sim_cluster.exec(
        head.name,
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://{worker.fabric_ip}:30000/v1/models"],
    )
    assert res.stdout == "404"
    chat = sim_cluster.exec(
        head.name,
        [
            "curl",
            "-sf",
            f"http://{head.fabric_ip}:30000/v1/chat/completions",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}',
        ],
    )
    assert chat.returncode == 0 and '"chat.completion"' in chat.stdout
