"""The generated scripts, unchanged, on the simulated cluster: real sshd, dockerd, Ray and gloo.

Specs are the examples adapted only through spec fields (addresses, image, mounts, limits this machine
cannot grant); the scripts run on the head node as an operator would run them.
"""
from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.emit import emit
from compiler.pipeline import compile_text
from tests.conftest import EXAMPLES
from tests.simcluster import SimCluster, container_mounts
from tests.simcluster.images import HELLOHAL_IMAGE, NORAY_IMAGE, VLLM_IMAGE

pytestmark = pytest.mark.cluster

HELLOHAL_REAL = "hellohal2064/vllm-qwen3.5-gb10:latest"  # the seed's image name; the sim image is tagged so


class Deployment:
    """One compiled spec on the cluster: run its scripts on the head, look at its containers."""

    def __init__(self, cluster: SimCluster, spec: dict[str, Any], build: Path) -> None:
        self.cluster, self.spec, self.build = cluster, spec, build
        self.name = spec["name"]
        text = _dump(spec)
        result = compile_text(text, "spec.yaml")
        assert result.ok, [d.message for d in result.diagnostics]
        self.warnings = [d.message for d in result.diagnostics]
        self.manifest = json.loads(result.files["manifest.json"])
        emit(result.files, build)

    @property
    def nodes(self) -> list[str]:
        return [n["name"] for n in self.spec["cluster"]["nodes"]]

    def run(self, script: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None):
        start = time.monotonic()
        result = self.cluster.exec(self.cluster.head.name, ["bash", str(self.build / script), *args],
                                   timeout=timeout, env=env)
        result.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
        return result

    def container(self, node: str) -> str:
        return f"sparkc-{self.name}-{node}"

    def containers_on(self, node: str) -> list[str]:
        out = self.cluster.docker(node, "ps", "-a", "--filter", f"label=sparkc.deployment={self.name}",
                                  "--format", "{{.Names}}").stdout
        return out.split()

    def standin_env(self, node: str) -> dict[str, Any]:
        logs = self.cluster.docker(node, "logs", self.container(node)).stdout
        line = next(line for line in logs.splitlines() if line.startswith("SPARKC_STANDIN_ENV "))
        return json.loads(line.split(" ", 1)[1])

    def saved_logs(self) -> list[Path]:
        return sorted((self.build / "logs").iterdir()) if (self.build / "logs").exists() else []

    def remove(self) -> None:
        for node in self.nodes:
            for name in self.containers_on(node):
                self.cluster.docker(node, "rm", "-f", name, timeout=60)


def _dump(spec: dict[str, Any]) -> str:
    import io

    buf = io.StringIO()
    YAML().dump(spec, buf)
    return buf.getvalue()


def sim_spec(cluster: SimCluster, example: str, name: str, nodes: int, model_dir: Path) -> dict[str, Any]:
    """An example, adapted to the simulated cluster through spec fields only."""
    spec = copy.deepcopy(YAML(typ="safe").load((EXAMPLES / example).read_text()))
    spec["name"] = name
    options = cluster.ssh_options
    spec["cluster"]["ssh"] = {
        "user": "root", "identity_file": str(cluster.ssh_key), "connect_timeout": 5,
        "options": [options[i + 1] for i, o in enumerate(options) if o == "-o" and "BatchMode" not in options[i + 1]],
    }
    spec["cluster"]["nodes"] = [
        {"name": n.name, "ssh": n.mgmt_ip, "fabric": {"ip": n.fabric_ip, "netdev": n.fabric_netdev, "hcas": []}}
        for n in cluster.nodes[:nodes]
    ]
    container = spec["container"]
    container.pop("secrets", None)
    container.pop("shm_size", None)
    container["privileged"] = False  # this machine cannot grant it (SIMCLUSTER.md)
    container["ulimits"] = {"memlock": None}
    container["mounts"] = [{"host": h, "container": c, "readonly": True} for h, c in container_mounts()]
    spec["model"]["path"] = str(model_dir)
    spec["engine"]["tensor_parallel"] = nodes
    spec["engine"]["max_model_len"] = 4096
    spec["launch"] = {"timeout": 240, "ray_object_store_memory": 200_000_000}
    return spec


@pytest.fixture
def deploy(sim_cluster: SimCluster, sim_model_dir: Path, tmp_path: Path) -> Iterator:
    made: list[Deployment] = []
    for node in sim_cluster.nodes:  # the seed's image name, as an operator would have pulled it
        sim_cluster.docker(node.name, "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)

    def make(example: str, name: str, nodes: int = 2, **changes: Any) -> Deployment:
        spec = sim_spec(sim_cluster, example, name, nodes, sim_model_dir)
        for dotted, value in changes.items():
            target = spec
            *parents, last = dotted.split("__")
            for part in parents:
                target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
            target[last] = value
        deployment = Deployment(sim_cluster, spec, tmp_path / f"build-{name}-{len(made)}")
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.remove()


def assert_failed(result, node: str, phase: str, budget: float) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"FAILED in phase {phase} on node {node}" in result.stderr, output
    assert result.elapsed < budget, f"took {result.elapsed:.0f}s, budget {budget}s"


def ask(cluster: SimCluster, port: int, model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "prompt": "hello", "max_tokens": 4})
    res = cluster.exec(cluster.head.name, ["curl", "-sf", "-H", "Content-Type: application/json", "-d", body,
                                           f"http://127.0.0.1:{port}/v1/completions"], check=True)
    return json.loads(res.stdout)


# -- 1. the examples come up, report healthy, gather logs, stop, and come up again -----------------


def test_seed_ray_example_lifecycle(deploy, sim_cluster: SimCluster, tmp_path: Path) -> None:
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


def test_native_example_three_nodes_per_node_settings(deploy, sim_cluster: SimCluster) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "native", nodes=3, container__image=VLLM_IMAGE,
               model__architecture={"attention_heads": 6, "kv_heads": 6}, container__secrets=["HF_TOKEN"])
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
        assert seen["argv"][seen["argv"].index("--node-rank") + 1] == str(planned["rank"])
    spark3 = d.standin_env("spark3")["env"]
    assert spark3["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0" and spark3["VLLM_HOST_IP"] == "10.78.0.13"
    assert d.run("status.sh").returncode == 0
    assert d.run("stop-cluster.sh").returncode == 0
    assert all(d.containers_on(n) == [] for n in d.nodes)


def test_sglang_example_two_nodes(deploy, sim_cluster: SimCluster) -> None:
    d = deploy("sglang-qwen3-30b-2spark.yaml", "sglang", container__image=VLLM_IMAGE,
               model__architecture={"attention_heads": 6})
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ask(sim_cluster, 30000, "qwen3-30b")["choices"]
    worker = d.standin_env("spark2")
    assert worker["engine"] == "sglang" and worker["env"]["SGLANG_HOST_IP"] == "10.78.0.12"
    assert "10.78.0.11:29501" in worker["argv"]
    assert d.run("stop-cluster.sh").returncode == 0


# -- 3. an image that rewrites its command line comes up where the manifest says ------------------


@pytest.mark.parametrize("mode", ["bypass", "adapt", "keep"])
def test_hellohal_entrypoint_modes(deploy, sim_cluster: SimCluster, mode: str) -> None:
    changes: dict[str, Any] = {"container__entrypoint": mode}
    if mode == "keep":
        changes["model__mount"] = "/models/model"  # where this entrypoint loads from, whatever it is told
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", f"hh-{mode}", **changes)
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


def test_worker_unreachable(deploy, sim_cluster: SimCluster) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-ssh")
    sim_cluster.break_sshd("spark2")
    try:
        result = d.run("launch-cluster.sh")
    finally:
        sim_cluster.restore_sshd("spark2")
    assert_failed(result, "spark2", "preflight", 60)
    assert "cannot reach root@10.77.0.12 over ssh" in result.stderr
    assert d.saved_logs()


@pytest.mark.parametrize("fault, expected", [
    ("missing", f"docker save {VLLM_IMAGE} | ssh root@10.77.0.12 docker load"),
    ("different", "differs between nodes"),
])
def test_image_missing_or_different_on_a_worker(deploy, sim_cluster: SimCluster, fault: str, expected: str) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", f"f-img-{fault}", container__image=VLLM_IMAGE)
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


def test_api_port_taken_then_a_new_launch_converges(deploy, sim_cluster: SimCluster) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "f-port", container__image=VLLM_IMAGE)
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


def test_engine_crashes_during_load(deploy) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "f-crash", container__image=VLLM_IMAGE,
               container__env={"SPARKC_STANDIN_CRASH": "load"})
    result = d.run("launch-cluster.sh")
    assert result.returncode == 1 and "FAILED in phase readiness" in result.stderr
    assert result.elapsed < 90
    saved = d.saved_logs()[-1]
    assert "simulated crash while loading weights" in "".join(p.read_text() for p in saved.glob("*.log"))
    assert all(d.containers_on(n) for n in d.nodes)  # kept for inspection


def test_ray_engine_crash_on_the_head(deploy) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-raycrash", container__env={"SPARKC_STANDIN_CRASH": "load"})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "readiness", 120)
    assert "engine exited with status" in result.stderr


def test_rendezvous_never_completes_on_a_wrong_interface(deploy) -> None:
    # F3: spark3 is cabled on enp1s0f0np0, the spec says enp1s0f1np1 (no such interface there).
    d = deploy("llama33-70b-2spark-native.yaml", "f-ifname", nodes=3, container__image=VLLM_IMAGE,
               model__architecture={"attention_heads": 6}, cluster__nodes__2__fabric__netdev="enp1s0f1np1")
    caught = d.run("launch-cluster.sh")  # preflight sees it in seconds
    assert_failed(caught, "spark3", "preflight", 60)
    assert "network interface enp1s0f1np1 does not exist on spark3" in caught.stderr
    result = d.run("launch-cluster.sh", "--skip-preflight")  # and without preflight, the rendezvous fails
    assert_failed(result, "spark3", "readiness", 120)
    saved = d.saved_logs()[-1]
    assert "enp1s0f1np1" in (saved / "spark3.log").read_text()


def test_worker_container_dies_after_start(deploy) -> None:
    d = deploy("llama33-70b-2spark-native.yaml", "f-worker", container__image=VLLM_IMAGE,
               cluster__nodes__1__env={"SPARKC_STANDIN_CRASH": "load"})
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark2", "readiness", 90)
    assert "container sparkc-f-worker-spark2 is exited" in result.stderr


def test_ray_missing_from_the_image(deploy) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "f-noray", container__image=NORAY_IMAGE)
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "preflight", 60)
    assert "Ray is not in image" in result.stderr
    assert all(d.containers_on(n) == [] for n in d.nodes)
