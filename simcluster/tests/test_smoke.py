"""The simulated cluster itself, proven without any sparkc script."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from simcluster import HELLOHAL_IMAGE, IMAGES, VLLM_IMAGE, SimCluster
from simcluster.fixtures import HEAD_NETDEV, MODEL_IN_CONTAINER, ODD_NETDEV, Container, Runner, wait_until
from simcluster.hardware import VLLM_FITS

pytestmark = pytest.mark.cluster


def test_nodes_are_separate_hosts(sim_cluster: SimCluster) -> None:
    host_pidns = os.readlink("/proc/self/ns/pid")
    seen_pidns = set()
    for node in sim_cluster.nodes:
        script = "hostname; readlink /proc/self/ns/pid; cat /proc/1/comm; ip -o -4 addr show"
        res = sim_cluster.exec(node.name, ["sh", "-c", script], check=True)
        hostname, pidns, init_comm, *addrs = res.stdout.splitlines()
        assert hostname == node.name
        assert pidns != host_pidns
        seen_pidns.add(pidns)
        assert init_comm.startswith("python"), "PID 1 of a node is its reaper"
        text = "\n".join(addrs)
        assert f"mgmt0    inet {node.mgmt_ip}/24" in text
        assert f"{node.fabric_netdev}    inet {node.fabric_ip}/24" in text
    assert len(seen_pidns) == len(sim_cluster.nodes)
    assert sim_cluster.node("spark3").fabric_netdev == ODD_NETDEV
    assert sim_cluster.head.fabric_netdev == HEAD_NETDEV


def test_nodes_do_not_share_posix_shared_memory(sim_cluster: SimCluster, run_container: Runner) -> None:
    # What vLLM does to tell ranks on one host from ranks on another (in_the_same_node_as): one creates
    # a segment in /dev/shm, the others try to open it. Containers with --ipc host see their node's.
    name = f"/dev/shm/sparkc-sim-{os.getpid()}"
    writer = run_container("spark1", VLLM_IMAGE, ["sh", "-c", f"echo magic > {name}"], gpus=False)
    assert writer.wait_exit(60) == 0, writer.logs()
    try:
        assert sim_cluster.exec("spark1", ["cat", name], check=True).stdout == "magic\n"
        for node in ("spark2", "spark3"):
            assert sim_cluster.exec(node, ["test", "-e", name]).returncode == 1, f"{node} sees spark1's {name}"
            reader = run_container(node, VLLM_IMAGE, ["test", "-e", name], gpus=False)
            assert reader.wait_exit(60) == 1, f"a container on {node} sees spark1's {name}"
        assert not os.path.exists(name), "the machine's own /dev/shm is not a node's"
    finally:
        sim_cluster.exec("spark1", ["rm", "-f", name])


def test_root_namespace_has_no_cluster_address(sim_cluster: SimCluster) -> None:
    with open("/proc/net/fib_trie") as fh:
        trie = fh.read()
    assert "10.77.0." not in trie and "10.78.0." not in trie


def test_ssh_between_nodes_by_key(sim_cluster: SimCluster) -> None:
    for worker in sim_cluster.workers:
        res = sim_cluster.ssh(
            sim_cluster.head.name, worker.name, "hostname; docker version --format '{{.Server.Version}}'"
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.split()[0] == worker.name

    # Inside a node, plain ssh by name checks host keys as OpenSSH does: each node has its own key and its
    # own known_hosts, so it is refused until spark1's key is recorded on spark2, and another node's key
    # recorded under spark1's name is refused too.
    def hostname() -> subprocess.CompletedProcess[str]:
        return sim_cluster.exec("spark2", ["ssh", "root@spark1", "hostname"], timeout=30)

    known = sim_cluster.known_hosts("spark2")
    saved = known.read_bytes() if known.exists() else b""
    try:
        refused = hostname()
        assert refused.returncode == 255 and "Host key verification failed." in refused.stderr, refused.stderr
        sim_cluster.record_host_keys("spark2", {"spark3": "spark1"})
        wrong = hostname()
        assert wrong.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in wrong.stderr, wrong.stderr
        known.write_bytes(saved)
        sim_cluster.record_host_keys("spark2", {"spark1": "spark1"})
        res = hostname()
        assert res.stdout.strip() == "spark1", res.stderr
    finally:
        known.write_bytes(saved)


def test_every_node_has_the_same_images(sim_cluster: SimCluster) -> None:
    for tag in IMAGES:
        ids = {n.name: sim_cluster.image_id(n.name, tag) for n in sim_cluster.nodes}
        assert None not in ids.values(), ids
        assert len(set(ids.values())) == 1, f"{tag} differs between nodes: {ids}"


def test_ray_cluster_from_containers_on_three_nodes(sim_cluster: SimCluster, run_container: Runner) -> None:
    head = sim_cluster.head
    ray_common = ["--num-gpus=1", "--object-store-memory=200000000", "--block"]
    head_c = run_container(
        head.name,
        VLLM_IMAGE,
        ["ray", "start", "--head", f"--node-ip-address={head.fabric_ip}", "--port=6379", *ray_common],
        env={"VLLM_HOST_IP": head.fabric_ip},
    )
    for w in sim_cluster.workers:
        run_container(
            w.name,
            VLLM_IMAGE,
            [
                "ray",
                "start",
                f"--address={head.fabric_ip}:6379",
                f"--node-ip-address={w.fabric_ip}",
                *ray_common,
            ],
            via_ssh=True,
        )

    probe = (
        "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
        "print(json.dumps({'nodes': sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']), "
        "'gpus': ray.cluster_resources().get('GPU', 0)}))"
    )
    result: dict[str, object] = {}

    def formed() -> bool:
        res = sim_cluster.docker(head.name, "exec", head_c.name, "python3", "-c", probe, timeout=60)
        if res.returncode != 0 or not res.stdout.strip():
            return False
        result.update(json.loads(res.stdout.strip().splitlines()[-1]))
        return len(result["nodes"]) == 3 and result["gpus"] == 3  # type: ignore[arg-type]

    took = wait_until(formed, 120, "3 alive Ray nodes with 3 GPUs", interval=2)
    assert result["nodes"] == sorted(n.fabric_ip for n in sim_cluster.nodes)
    print(f"ray cluster formed in {took:.1f} s")

    # The stand-in's Ray executor: one bundle per GPU, spread over the three nodes' fabric IPs.
    serve = (
        "vllm serve /models/tiny --served-model-name tiny --tensor-parallel-size 3 --gpu-memory-utilization 0.8 "
        "--distributed-executor-backend ray --port 8011 >/tmp/vllm.log 2>&1"
    )
    sim_cluster.docker(
        head.name,
        "exec",
        "-d",
        "-e",
        f"VLLM_HOST_IP={head.fabric_ip}",
        head_c.name,
        "sh",
        "-c",
        serve,
        check=True,
    )
    url = f"http://{head.fabric_ip}:8011"
    wait_until(
        lambda: sim_cluster.exec(head.name, ["curl", "-sf", f"{url}/health"]).returncode == 0,
        90,
        "the Ray-backed stand-in to answer /health",
    )
    log = sim_cluster.docker(head.name, "exec", head_c.name, "cat", "/tmp/vllm.log").stdout
    workers = [
        json.loads(line.split(" ", 1)[1]) for line in log.splitlines() if line.startswith("SPARKC_STANDIN_RAY_WORKER")
    ]
    assert sorted(w["node_ip"] for w in workers) == sorted(n.fabric_ip for n in sim_cluster.nodes)
    models = json.loads(sim_cluster.exec(head.name, ["curl", "-sf", f"{url}/v1/models"]).stdout)
    assert [m["id"] for m in models["data"]] == ["tiny"]


def _gloo_pair(run_container: Runner, cluster: SimCluster, worker_ifname: str) -> tuple[Container, Container]:
    head, worker = cluster.head, cluster.node("spark3")
    common = [
        "vllm",
        "serve",
        MODEL_IN_CONTAINER,
        *VLLM_FITS,
        "--tensor-parallel-size",
        "2",
        "--nnodes",
        "2",
        "--master-addr",
        head.fabric_ip,
        "--master-port",
        "29501",
        "--port",
        "8012",
    ]
    env = {"SPARKC_STANDIN_RENDEZVOUS_TIMEOUT_S": "10"}
    # Workers first, head last, as the launchers do.
    w = run_container(
        worker.name,
        VLLM_IMAGE,
        [*common, "--node-rank", "1", "--headless"],
        env={**env, "GLOO_SOCKET_IFNAME": worker_ifname},
        via_ssh=True,
    )
    h = run_container(
        head.name,
        VLLM_IMAGE,
        [*common, "--node-rank", "0"],
        env={**env, "GLOO_SOCKET_IFNAME": head.fabric_netdev},
    )
    return h, w


def test_gloo_rendezvous_with_per_node_ifname(sim_cluster: SimCluster, run_container: Runner) -> None:
    h, w = _gloo_pair(run_container, sim_cluster, ODD_NETDEV)
    url = f"http://{sim_cluster.head.fabric_ip}:8012/health"
    wait_until(
        lambda: sim_cluster.exec("spark1", ["curl", "-sf", url]).returncode == 0,
        60,
        f"rank 0 to serve /health; logs:\n{h.logs()}",
    )
    for c in (h, w):
        assert '"ok": true' in c.logs()
        assert c.state()[0] == "running"


def test_gloo_rendezvous_fails_with_a_wrong_ifname(sim_cluster: SimCluster, run_container: Runner) -> None:
    # spark3's fabric netdev is enp1s0f0np0; one global name (the head's) is the classic F3 mistake.
    start = time.monotonic()
    h, w = _gloo_pair(run_container, sim_cluster, HEAD_NETDEV)
    assert w.wait_exit(30) == 1
    assert f"Unable to find address for: {HEAD_NETDEV}" in w.logs()
    # The head waits for the missing rank until the rendezvous timeout, then gives up.
    assert h.wait_exit(40) == 1
    assert time.monotonic() - start < 45


def test_standin_rejects_unknown_flags(sim_cluster: SimCluster, run_container: Runner) -> None:
    c = run_container("spark2", VLLM_IMAGE, ["vllm", "serve", MODEL_IN_CONTAINER, *VLLM_FITS, "--bogus-flag", "1"])
    assert c.wait_exit(30) == 2
    assert "unrecognized arguments: --bogus-flag 1" in c.logs()
    s = run_container(
        "spark2",
        VLLM_IMAGE,
        [
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            MODEL_IN_CONTAINER,
            "--max-model-len",
            "4096",
        ],
    )
    assert s.wait_exit(30) == 2
    assert "unrecognized arguments: --max-model-len 4096" in s.logs()


def test_hellohal_entrypoint_ignores_port(sim_cluster: SimCluster, run_container: Runner) -> None:
    node = sim_cluster.node("spark2")
    c = run_container(
        node.name,
        HELLOHAL_IMAGE,
        [
            "vllm",
            "serve",
            MODEL_IN_CONTAINER,
            "--port",
            "30000",
            "--max-model-len",
            "4096",
            "--served-model-name",
            "qwen",
        ],
        env={"MODEL_PATH": MODEL_IN_CONTAINER, "PORT": "8123"},
    )
    wait_until(
        lambda: sim_cluster.exec(node.name, ["curl", "-sf", "http://127.0.0.1:8123/health"]).returncode == 0,
        30,
        f"hellohal to serve on PORT=8123; logs:\n{c.logs()}",
    )
    assert sim_cluster.exec(node.name, ["curl", "-sf", "http://127.0.0.1:30000/health"]).returncode != 0
    models = json.loads(sim_cluster.exec(node.name, ["curl", "-sf", "http://127.0.0.1:8123/v1/models"]).stdout)
    assert models["data"][0]["id"] == "qwen"
    assert models["data"][0]["max_model_len"] == 8192  # --max-model-len 4096 was dropped too
    assert "PORT=8123" in c.logs()
