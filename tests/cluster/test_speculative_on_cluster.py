"""Speculative methods on the simulated cluster: the mtp example across two nodes and the ngram example on one
become ready with nothing mounted beside the model, and a dflash draft with its folder mounted; the engine
takes the method sparkc wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcluster.images import VLLM_IMAGE
from simcluster.standin.speculative import MARKER
from tests.cluster.deployment import Deploy, Deployment
from tests.specs import flag_value

pytestmark = pytest.mark.cluster


def resolved(d: Deployment, node: str) -> dict[str, object]:
    """What the engine made of its speculative flags, from the line it logs before it loads."""
    logs = d.cluster.docker(node, "logs", d.container(node)).stdout
    line = next(line for line in logs.splitlines() if line.startswith(MARKER + " "))
    found: dict[str, object] = json.loads(line.split(" ", 1)[1])
    return found


def mounted(d: Deployment, node: str) -> list[str]:
    out = d.cluster.docker(node, "inspect", "--format", "{{json .Mounts}}", d.container(node)).stdout
    return [m["Destination"] for m in json.loads(out)]


def launched(d: Deployment) -> None:
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "READY" in launch.stdout


def test_mtp_example_serves_from_the_models_own_layers(deploy: Deploy, sim_model_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "mtp-model"
    model.mkdir()
    config = json.loads((sim_model_dir / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    model.chmod(0o755)
    d = deploy(
        "qwen3-next-80b-mtp-2spark.yaml",
        "mtp",
        {
            "container.image": VLLM_IMAGE,
            "model.path": str(model),
            "model.architecture": {"attention_heads": 6, "kv_heads": 6},
        },
    )
    launched(d)
    for node in d.nodes:
        seen = d.standin_env(node)["argv"]
        assert json.loads(flag_value(seen, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 2}
        assert resolved(d, node) == {"method": "mtp", "model": str(model), "num_speculative_tokens": 2}
        assert str(model) in mounted(d, node) and "/models/draft" not in mounted(d, node)
    assert d.run("stop-cluster.sh").returncode == 0


def test_ngram_example_serves_with_nothing_but_the_model(deploy: Deploy) -> None:
    d = deploy("solo-qwen3-32b-ngram.yaml", "ngram", {"container.image": VLLM_IMAGE}, nodes=1)
    launched(d)
    (node,) = d.nodes
    assert resolved(d, node) == {"method": "ngram", "model": "ngram", "num_speculative_tokens": 4}
    model = d.spec["model"]["path"]
    assert [m for m in mounted(d, node) if m.startswith("/models") or m == model] == [model]
    assert d.run("stop-cluster.sh").returncode == 0


def test_a_dflash_draft_serves_mounted_beside_the_model(deploy: Deploy, sim_model_dir: Path, tmp_path: Path) -> None:
    """vLLM's dflash with a draft folder whose config names a DFlash architecture vLLM registers."""
    draft = tmp_path / "dflash-draft"
    draft.mkdir()
    config = json.loads((sim_model_dir / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "architectures": ["DFlashDraftModel"]}))
    draft.chmod(0o755)
    changes = {
        "container.image": VLLM_IMAGE,
        "model.draft": {"method": "dflash", "path": str(draft), "mount": "/models/draft", "num_speculative_tokens": 15},
    }
    d = deploy("solo-qwen3-32b.yaml", "dflash", changes, nodes=1)
    launched(d)
    (node,) = d.nodes
    assert resolved(d, node) == {"method": "dflash", "model": "/models/draft", "num_speculative_tokens": 15}
    assert "/models/draft" in mounted(d, node)
    assert d.run("stop-cluster.sh").returncode == 0
