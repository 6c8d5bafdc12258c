"""The generated scripts, unchanged, on the simulated cluster: real sshd, dockerd, Ray and gloo.

Specs are the examples adapted only through spec fields (addresses, image, mounts, limits this machine
cannot grant); the scripts run on the head node as an operator would run them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from simcluster import SimCluster
from simcluster.images import NORAY_IMAGE, VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.specs import DELETE, flag_value

pytestmark = pytest.mark.cluster


def assert_failed(result, node: str, phase: str, budget: float) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"FAILED in phase {phase} on node {node}" in result.stderr, output
    assert result.elapsed < budget, f"took {result.elapsed:.0f}s, budget {budget}s"


def ask(cluster: SimCluster, port: int, model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "prompt": "hello", "max_tokens": 4})
    res = cluster.exec(
        cluster.head.name,
        ["curl", "-sf", "-H", "Content-Type: application/json", "-d", body, f"http://127.0.0.1:{port}/v1/completions"],
        check=True,
    )
    return json.loads(res.stdout)


def assert_engine_view(d: Deploy, cluster: SimCluster, model: str, first: str) -> None:
    """status.sh's engine lines from the stand-in's vLLM /metrics: the first call's tokens (the launch's readiness
    request and one more), then a rate over the requests between two calls; the JSON form and the timeline."""
    assert re.search(r"^engine: 0 running, 0 waiting, KV cache 0\.0% in use$", first, re.M), first
    assert re.search(r"^rate: from the next call on", first, re.M), first
    assert re.search(r"^last launch \S+ \(ready\): ready in \d+s, first token in [0-9.]+s$", first, re.M), first
    tokens = re.search(r"^tokens: \d+ prompt, (\d+) generated$", first, re.M)
    assert tokens, first
    for _ in range(3):
        ask(cluster, 30000, model)  # 4 tokens each
    view = json.loads(d.run("status.sh", "--format", "json").stdout)
    # and status.sh's own one-token probe, sent before it reads /metrics
    assert view["healthy"] is True and view["metrics"]["generation"] == int(tokens.group(1)) + 13, view
    assert view["metrics"]["running"] == 0 and view["metrics"]["engines"] == 1
    assert view["rates"]["generation_rate"] > 0 and view["rates"]["seconds"] > 0, view
    assert view["timeline"]["ready_after_s"] > 0 and view["timeline"]["phases"][0]["phase"] == "preflight"


# -- 1. the examples come up, report healthy, gather logs, stop, and come up again -----------------


def test_seed_ray_example_lifecycle(deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "seed")
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "READY" in launch.stdout and "== ray done" in launch.stdout
    plan = d.manifest["plan"]
    assert plan["api_port"] == 30000 and plan["entrypoint_mode"] == "adapt"
    answer = ask(sim_cluster, 30000, plan["served_model_name"])
    assert answer["choices"]

    status = d.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "ray: 2/2 nodes alive, 2/2 GPUs; missing: none" in status.stdout and "healthy" in status.stdout
    assert_engine_view(d, sim_cluster, plan["served_model_name"], status.stdout)

    gathered = tmp_path / "gathered"
    logs = d.run("logs.sh", "--out", str(gathered))
    assert logs.returncode == 0, logs.stderr
    assert "SPARKC_STANDIN_ENV" in (gathered / "spark1.log").read_text()  # the engine's output, via docker logs
    assert (gathered / "spark2.log").read_text().strip()

    again = d.run("launch-cluster.sh")
    assert again.returncode == 0 and "nothing to do" in again.stdout

    stop = d.run("stop-cluster.sh")
    assert stop.returncode == 0, stop.stderr
    assert all(d.containers_on(n) == [] for n in d.nodes)

    relaunch = d.run("launch-cluster.sh")
    assert relaunch.returncode == 0, relaunch.stdout + relaunch.stderr
    assert d.run("stop-cluster.sh").returncode == 0


def test_native_example_three_nodes_per_node_settings(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "native",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": {"attention_heads": 6, "kv_heads": 6},
            "container.secrets": ["HF_TOKEN"],
        },
        nodes=3,
    )
    launch = d.run("launch-cluster.sh", env={"HF_TOKEN": "hf_sim_s3cret"})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    # the secret reached every node through real ssh's stdin, and nothing written or printed shows it
    assert {d.standin_env(n)["env"].get("HF_TOKEN") for n in d.nodes} == {"hf_sim_s3cret"}
    written = "".join(p.read_text() for p in d.build.iterdir() if p.is_file())
    assert "hf_sim_s3cret" not in written + launch.stdout + launch.stderr
    assert ask(sim_cluster, 8000, "meta-llama/Llama-3.3-70B-Instruct")["choices"]
    # 2. what every node's engine really saw is what the manifest says it would
    for planned in d.manifest["plan"]["nodes"]:
        seen = d.standin_env(planned["name"])
        assert seen["hostname"] == planned["name"]
        for setting in planned["env"]:
            assert seen["env"].get(setting["name"]) == setting["value"], (planned["name"], setting["name"])
        assert flag_value(seen["argv"], "--node-rank") == str(planned["rank"])
    spark3 = d.standin_env("spark3")["env"]
    assert spark3["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0" and spark3["VLLM_HOST_IP"] == "10.78.0.13"
    assert d.run("status.sh").returncode == 0
    assert d.run("stop-cluster.sh").returncode == 0
    assert all(d.containers_on(n) == [] for n in d.nodes)


def test_ray_workers_keep_their_own_fabric_settings(deploy: Deploy, sim_cluster: SimCluster) -> None:
    """vLLM's Ray executor copies the head's NCCL_*, UCX_*, VLLM_* ... to every worker; spark3 is cabled
    on another port and pins another GID, so each worker must still run with its own values."""
    d = deploy(
        "qwen3-32b-2spark-ray-crosscabled.yaml",
        "crossray",
        {
            # The seed's image (the sim tags its hellohal-like image so): its profile says Ray is in
            # it; the sim's images find Ray only through mounts, which preflight's image check lacks.
            "container.image": "hellohal2064/vllm-qwen3.5-gb10:latest",
            "container.entrypoint": "adapt",
            "model.architecture": DELETE,
            **{f"cluster.nodes.{i}.env": {"NCCL_IB_GID_INDEX": str(3 + i)} for i in range(3)},
        },
        nodes=3,
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    head_log = sim_cluster.docker(d.nodes[0], "logs", d.container(d.nodes[0])).stdout
    workers = [json.loads(line.split(" ", 1)[1]) for line in head_log.splitlines()
               if line.startswith("SPARKC_STANDIN_RAY_WORKER ")]  # fmt: skip
    assert sorted(w["node_ip"] for w in workers) == sorted(n["fabric_ip"] for n in d.manifest["plan"]["nodes"])
    for worker in workers:
        planned = next(n for n in d.manifest["plan"]["nodes"] if n["fabric_ip"] == worker["node_ip"])
        env = {s["name"]: s["value"] for s in planned["env"]}
        for name in ("NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_GID_INDEX", "VLLM_HOST_IP"):
            assert worker["env"].get(name) == env[name], (planned["name"], name)
    spark3 = next(w for w in workers if w["node_ip"] == "10.78.0.13")["env"]
    assert spark3["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0" and spark3["NCCL_IB_GID_INDEX"] == "5"
    assert d.run("stop-cluster.sh").returncode == 0


def test_an_api_key_guards_v1_and_the_probes_send_it(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "apikey",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": DELETE,
            "container.secrets": ["VLLM_API_KEY"],
        },
    )
    launch = d.run("launch-cluster.sh", env={"VLLM_API_KEY": "sk-sim"})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    url = "http://127.0.0.1:8000/v1/models"
    bare = sim_cluster.exec(d.nodes[0], ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url])
    assert bare.stdout == "401"
    keyed = ["curl", "-sf", "-H", "Authorization: Bearer sk-sim", url]
    assert "meta-llama/Llama-3.3-70B-Instruct" in sim_cluster.exec(d.nodes[0], keyed, check=True).stdout
    assert d.run("status.sh", env={"VLLM_API_KEY": "sk-sim"}).returncode == 0
    assert d.run("stop-cluster.sh").returncode == 0


def test_sglang_example_two_nodes(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(
        "sglang-qwen3-30b-2spark.yaml",
        "sglang",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": {"attention_heads": 6},
            # Page cache leaves the worker less free memory than the head: SGLang's balance check
            # would refuse to start; sparkc switches it off for multi-node SGLang.
            "cluster.nodes.1.env": {"SPARKC_STANDIN_FREE_MEMORY_GB": "70"},
        },
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ask(sim_cluster, 30000, "qwen3-30b")["choices"]
    worker = d.standin_env("spark2")
    assert worker["engine"] == "sglang" and worker["env"]["SGLANG_HOST_IP"] == "10.78.0.12"
    assert flag_value(worker["argv"], "--dist-init-addr") == "10.78.0.11:29501"
    assert d.run("stop-cluster.sh").returncode == 0


# -- 3. an image that rewrites its command line comes up where the manifest says ------------------


@pytest.mark.parametrize("mode", ["bypass", "adapt", "keep"])
def test_hellohal_entrypoint_modes(deploy: Deploy, sim_cluster: SimCluster, mode: str) -> None:
    changes: dict[str, Any] = {"container.entrypoint": mode}
    if mode == "keep":
        changes["model.mount"] = "/models/model"  # where this entrypoint loads from, whatever it is told
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", f"hh-{mode}", changes)
    port = d.manifest["plan"]["api_port"]
    assert port == (8000 if mode == "keep" else 30000)
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    served = d.manifest["plan"]["served_model_name"]
    assert ask(sim_cluster, port, served)["choices"]
    models = json.loads(sim_cluster.exec("spark1", ["curl", "-sf", f"http://127.0.0.1:{port}/v1/models"]).stdout)
    effective = {e["setting"]: e["effective"] for e in d.manifest["plan"]["effective"]}
    assert models["data"][0]["max_model_len"] == int(effective["max_model_len"])
    assert d.run("stop-cluster.sh").returncode == 0


# -- 4. faults: non-zero within budget, node and phase named, logs saved, containers kept ----------


def test_worker_unreachable(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-ssh")
    sim_cluster.break_sshd("spark2")
    try:
        result = d.run("launch-cluster.sh")
    finally:
        sim_cluster.restore_sshd("spark2")
    assert_failed(result, "spark2", "preflight", 60)
    assert "cannot reach root@10.77.0.12 over ssh" in result.stderr
    assert d.saved_logs()


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("missing", f"docker save {VLLM_IMAGE} | ssh root@10.77.0.12 docker load"),
        ("different", "differs between nodes"),
    ],
)
def test_image_missing_or_different_on_a_worker(
    deploy: Deploy, sim_cluster: SimCluster, fault: str, expected: str
) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", f"f-img-{fault}", {"container.image": VLLM_IMAGE})
    if fault == "missing":
        sim_cluster.break_remove_image("spark2", VLLM_IMAGE)
    else:
        sim_cluster.break_swap_image("spark2", VLLM_IMAGE)
    try:
        result = d.run("launch-cluster.sh")
    finally:
        sim_cluster.load_image("spark2", VLLM_IMAGE)
    assert_failed(result, "spark2", "preflight", 60)
    assert expected in result.stderr


def test_api_port_taken_then_a_new_launch_converges(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "f-port", {"container.image": VLLM_IMAGE})
    blocker = sim_cluster.break_occupy_port("spark1", 8000)
    try:
        result = d.run("launch-cluster.sh")
    finally:
        blocker.release()
    assert_failed(result, "spark1", "containers", 60)
    assert "port 8000 is already in use" in result.stderr
    # 5. after the failed launch, a new one converges
    retry = d.run("launch-cluster.sh")
    assert retry.returncode == 0, retry.stdout + retry.stderr


def test_engine_crashes_during_load(deploy: Deploy) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "f-crash",
        {"container.image": VLLM_IMAGE, "container.env": {"SPARKC_STANDIN_CRASH": "load"}},
    )
    result = d.run("launch-cluster.sh")
    assert result.returncode == 1 and "FAILED in phase readiness" in result.stderr
    assert result.elapsed < 90
    saved = d.saved_logs()[-1]
    assert "simulated crash while loading weights" in "".join(p.read_text() for p in saved.glob("*.log"))
    assert all(d.containers_on(n) for n in d.nodes)  # kept for inspection


def test_ray_engine_crash_on_the_head(deploy: Deploy) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-raycrash", {"container.env.SPARKC_STANDIN_CRASH": "load"})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "readiness", 120)
    assert "engine exited with status" in result.stderr
    assert "log watch ended" not in result.stderr  # told by real docker logs -f, not by the exit file


def test_rendezvous_never_completes_on_a_wrong_interface(deploy: Deploy) -> None:
    # F3: spark3 is cabled on enp1s0f0np0, the spec says enp1s0f1np1 (no such interface there).
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "f-ifname",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": {"attention_heads": 6},
            "cluster.nodes.2.fabric.netdev": "enp1s0f1np1",
        },
        nodes=3,
    )
    caught = d.run("launch-cluster.sh")  # preflight sees it in seconds
    assert_failed(caught, "spark3", "preflight", 60)
    assert "network interface enp1s0f1np1 does not exist on spark3" in caught.stderr
    probed = d.run("launch-cluster.sh", "--skip-preflight")  # without preflight, the probe's Gloo fails there
    assert_failed(probed, "spark3", "probe", 120)
    assert "Unable to find address for: enp1s0f1np1" in probed.stderr
    result = d.run("launch-cluster.sh", "--skip-preflight", "--no-probe")  # and without both, the rendezvous
    assert_failed(result, "spark3", "readiness", 120)
    saved = d.saved_logs()[-1]
    assert "enp1s0f1np1" in (saved / "spark3.log").read_text()


def test_worker_container_dies_after_start(deploy: Deploy) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "f-worker",
        {"container.image": VLLM_IMAGE, "cluster.nodes.1.env": {"SPARKC_STANDIN_CRASH": "load"}},
    )
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark2", "readiness", 90)
    assert "container sparkc-f-worker-spark2 is exited" in result.stderr


def test_ray_missing_from_the_image(deploy: Deploy) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-noray", {"container.image": NORAY_IMAGE})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "preflight", 60)
    assert "Ray is not in image" in result.stderr
    assert all(d.containers_on(n) == [] for n in d.nodes)


def test_api_port_taken_on_the_lan_address_is_found_before_the_engine_starts(
    deploy: Deploy, sim_cluster: SimCluster
) -> None:
    """A listener on the head's management (LAN) address only: the engine binds 0.0.0.0 and would die."""
    d = deploy("llama33-70b-2spark-native.yaml", "f-lanport", {"container.image": VLLM_IMAGE})
    blocker = sim_cluster.break_occupy_port("spark1", 8000, host=sim_cluster.head.mgmt_ip)
    try:
        result = d.run("launch-cluster.sh", "--no-probe")
    finally:
        blocker.release()
    assert_failed(result, "spark1", "containers", 60)
    assert "the API port 8000 is already in use on the head by another program (where the engine binds it" in (
        result.stderr
    )
