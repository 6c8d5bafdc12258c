"""The weights on the simulated cluster: a draft model and a Hugging Face cache served for real, and the
preflight checks of the weights (revision, links into nothing), each failing with the node named."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import assert_failed
from tests.specs import DELETE, flag_value

pytestmark = pytest.mark.cluster

EXAMPLE = "llama33-70b-draft-2spark.yaml"
COMMIT = "1f0e3c5a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f"


def hf_cache(root: Path, config: dict[str, object]) -> Path:
    """A Hugging Face cache as huggingface_hub lays it out: refs/main names the commit, the snapshot's
    files are relative links into ../../blobs."""
    repo = root / "hub" / "models--org--tiny"
    data = json.dumps(config).encode()
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    snapshot = repo / "snapshots" / COMMIT
    for folder in (blob.parent, snapshot, repo / "refs"):
        folder.mkdir(parents=True)
    blob.write_bytes(data)
    (snapshot / "config.json").symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs" / "main").write_text(COMMIT)
    for folder in (root, *root.rglob("*")):
        if folder.is_dir():
            folder.chmod(0o755)
    return root / "hub"


@pytest.fixture
def weights(tmp_path: Path, sim_model_dir: Path) -> dict[str, Path]:
    config = json.loads((sim_model_dir / "config.json").read_text())
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(config))
    draft.chmod(0o755)
    return {"hub": hf_cache(tmp_path / "cache", config), "draft": draft}


def test_draft_example_serves_a_cache_branch_with_its_draft(deploy: Deploy, weights: dict[str, Path]) -> None:
    d = deploy(
        EXAMPLE,
        "draft",
        {
            "container.image": VLLM_IMAGE,
            "model.path": DELETE,
            "model.hf_cache": str(weights["hub"]),
            "model.repo": "org/tiny",
            "model.revision": "main",  # a branch: each node's refs/main names the commit at launch
            "model.architecture": {"attention_heads": 6, "kv_heads": 6},
            "model.draft.path": str(weights["draft"]),
            "launch.drop_page_cache": True,
        },
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "page cache dropped" in launch.stdout
    for node in d.nodes:
        seen = d.standin_env(node)["argv"]
        assert json.loads(flag_value(seen, "--speculative-config")) == {
            "method": "draft_model",
            "model": "/models/draft",
            "num_speculative_tokens": 4,
        }
        assert flag_value(seen, "--kv-cache-memory-bytes") == str(24 * 1024**3)
        assert seen[seen.index("serve") + 1].endswith("/models--org--tiny/snapshots/main")
        mounts = d.cluster.docker(node, "inspect", "--format", "{{json .Mounts}}", d.container(node)).stdout
        assert f"snapshots/{COMMIT}" in mounts  # the branch, resolved on the node, reached docker
    assert d.run("stop-cluster.sh").returncode == 0


@pytest.mark.parametrize("fault", ["revision", "dangling"])
def test_weights_fault_fails_preflight_naming_the_node(deploy: Deploy, weights: dict[str, Path], fault: str) -> None:
    snapshot = weights["hub"] / "models--org--tiny" / "snapshots" / COMMIT
    changes: dict[str, object] = {
        "container.image": VLLM_IMAGE,
        "model.hf_cache": DELETE,
        "model.repo": DELETE,
        "model.path": str(snapshot),
        "model.revision": "0123456" if fault == "revision" else COMMIT,
        "model.architecture": {"attention_heads": 6, "kv_heads": 6},
        "model.draft": DELETE,
    }
    if fault == "dangling":
        (snapshot / "model.safetensors").symlink_to("../../blobs/never-downloaded")
    d = deploy(EXAMPLE, f"f-{fault}", changes)
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "preflight", 60)
    if fault == "revision":
        assert f"is snapshot {COMMIT}, not revision 0123456" in result.stderr
    else:
        assert "model.safetensors on spark1 is a link to a file that does not exist" in result.stderr
    assert d.containers_on("spark1") == []


@pytest.mark.parametrize("fault", ["missing", "dangling"])
def test_draft_fault_fails_preflight_naming_every_node(deploy: Deploy, weights: dict[str, Path], fault: str) -> None:
    draft = weights["draft"]
    if fault == "dangling":
        (draft / "model.safetensors").symlink_to("never-copied")
    path = draft if fault == "dangling" else draft.parent / "no-such-draft"
    changes: dict[str, object] = {
        "container.image": VLLM_IMAGE,
        "model.path": DELETE,
        "model.hf_cache": str(weights["hub"]),
        "model.repo": "org/tiny",
        "model.revision": COMMIT,
        "model.architecture": {"attention_heads": 6, "kv_heads": 6},
        "model.draft.path": str(path),
    }
    d = deploy(EXAMPLE, f"d-{fault}", changes)
    result = d.run("launch-cluster.sh")
    assert_failed(result, "spark1", "preflight", 60)
    for node in d.nodes:
        if fault == "missing":
            assert f"draft model directory {path} does not exist on {node}" in result.stderr
        else:
            assert f"{draft}/model.safetensors on {node} is a link to a file that does not exist" in result.stderr
    assert d.containers_on("spark1") == []
