"""The gateway on the simulated cluster: two deployments compiled together, launched side by side on the head,
answer through one LiteLLM address, each by its model name (or alias); a model neither serves gets LiteLLM's
error; the keyed deployment's key reaches it from the environment, by name, never through the config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simcluster import SimCluster, container_mounts
from simcluster.images import LITELLM_IMAGE, VLLM_IMAGE
from simcluster.runtime import LITELLM_VENV
from tests.cluster.deployment import sim_spec
from tests.product import run_sparkc
from tests.specs import DELETE, dump

pytestmark = pytest.mark.cluster

SMALL = "side-by-side/qwen3-8b-beside.yaml"
PORT = 4100  # not LiteLLM's default: the test must not depend on what else listens there
KEY, GATEWAY_KEY = "sk-sim-deployment-key", "sk-sim-gateway-key"
ENV = {"VLLM_API_KEY": KEY, "SPARKC_GATEWAY_KEY": GATEWAY_KEY}


def _ask(cluster: SimCluster, model: str, key: str = GATEWAY_KEY) -> tuple[int, dict[str, Any]]:
    """A chat completion through the gateway on the head: (HTTP status, answer)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 3})
    url = f"http://127.0.0.1:{PORT}/v1/chat/completions"
    auth = f"Authorization: Bearer {key}"
    argv = ["curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-H", auth, "-d", body, url]
    done = cluster.exec(cluster.head.name, argv, check=True, timeout=60)
    text, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(text)


def test_two_deployments_answer_through_one_gateway(
    sim_cluster: SimCluster, sim_model_dir: Path, tmp_path: Path
) -> None:
    if not (LITELLM_VENV / "bin" / "litellm").exists():
        pytest.fail(f"{LITELLM_VENV} is missing: run simcluster/install.sh")
    on_sim = {"container.image": VLLM_IMAGE, "cluster.file": DELETE}
    specs = {
        "gw-open": sim_spec(sim_cluster, SMALL, "gw-open", 1, sim_model_dir, {**on_sim, "engine.port": 8011}),
        "gw-keyed": sim_spec(
            sim_cluster,
            SMALL,
            "gw-keyed",
            1,
            sim_model_dir,
            {
                **on_sim,
                "engine.port": 8012,
                "model.name": "keyed-8b",
                "model.aliases": ["keyed-alias"],
                "container.secrets": ["VLLM_API_KEY"],
            },
        ),
    }
    files = []
    for name, spec in specs.items():
        files.append(tmp_path / f"{name}.yaml")
        files[-1].write_text(dump(spec), encoding="utf-8")
    mounts = [f"--gateway-mount={host}:{inside}" for host, inside in container_mounts(LITELLM_VENV)]
    out = tmp_path / "out"
    args = ["--gateway-port", str(PORT), "--gateway-image", LITELLM_IMAGE, *mounts]
    compiled = run_sparkc("compile", *files, "-o", out, *args)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    config = (out / "gateway" / "litellm-config.yaml").read_text()
    assert "os.environ/VLLM_API_KEY" in config and KEY not in config and GATEWAY_KEY not in config

    head = sim_cluster.head.name
    launched: list[str] = []

    def run(script: str, *words: str) -> Any:
        return sim_cluster.exec(head, ["bash", str(out / script), *words], env=ENV, timeout=300)

    try:
        for name in specs:
            done = run(f"{name}/launch-cluster.sh")
            assert done.returncode == 0, done.stdout + done.stderr
            launched.append(name)
        started = run("gateway/start-gateway.sh", "--timeout", "180")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "keyed-alias -> gw-keyed" in started.stdout
        assert run("gateway/start-gateway.sh", "--check").returncode == 0

        # each name reaches its own deployment: a stand-in answers only for the names it serves (404 otherwise),
        # and the keyed one only with its key, which the gateway read from its environment
        for model in ("qwen3-8b", "keyed-8b", "keyed-alias"):
            status, answer = _ask(sim_cluster, model)
            assert status == 200, answer
            assert answer["model"] == model and answer["choices"][0]["message"]["content"]
        status, answer = _ask(sim_cluster, "no-such-model")
        assert status == 400
        assert "Invalid model name passed in model=no-such-model" in answer["error"]["message"]
        # the gateway's own key guards it
        status, _ = _ask(sim_cluster, "qwen3-8b", key="sk-wrong")
        assert status != 200

        stopped = run("gateway/stop-gateway.sh")
        assert stopped.returncode == 0, stopped.stderr
        assert run("gateway/start-gateway.sh", "--check").returncode == 1
    finally:
        sim_cluster.docker(head, "rm", "-f", f"sparkc-gateway-{PORT}", timeout=60)
        for name in launched:
            run(f"{name}/stop-cluster.sh")
