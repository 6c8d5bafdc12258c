"""fetch-model.sh: the weights from the Hugging Face hub, downloaded on the head inside the image (fake
docker runs the program with a python that has huggingface_hub) from a local stand-in of the hub's API
(tests/fakes/hub.py), with HF_TOKEN passed by name only; resumable; refused when the disk lacks room."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.fakes.hub import Hub
from tests.product import needs
from tests.specs import DELETE, compile_spec, example, with_changes

SOLO = "solo-qwen3-32b.yaml"
REPO = "tiny-org/tiny-llama"
TOKEN = "hf_fetch-secret-sample"
MiB = 1024 * 1024


@pytest.fixture
def files() -> dict[str, bytes]:
    # large enough for huggingface_hub to write one 10 MiB chunk before a cut, so that it resumes by Range
    return {"config.json": b'{"model_type": "llama"}', "model.safetensors": os.urandom(24 * MiB), "sub/tok.json": b"{}"}


@pytest.fixture
def hub(files: dict[str, bytes]) -> Iterator[Hub]:
    needs(not _has_hub(), "needs huggingface_hub (pip install '.[test]')")
    with Hub(REPO, files, token=TOKEN) as running:
        yield running


def _has_hub() -> bool:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return False
    return True


def prepare(fake: FakeCluster, changes: dict[str, object]) -> dict[str, object]:
    spec = fake.adapt(SOLO)
    fake.compile(with_changes(spec, changes))
    return spec


def fetch(fake: FakeCluster, hub: Hub, *args: str, token: str = TOKEN) -> tuple[int, str]:
    env = {"HF_ENDPOINT": hub.url, "FAKE_PYTHON": sys.executable, "HF_HUB_DISABLE_TELEMETRY": "1"}
    if token:
        env["HF_TOKEN"] = token
    done = fake.run("fetch-model.sh", *args, env=env, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_into_a_hugging_face_cache_the_revision_the_launcher_serves(
    fake: FakeCluster, hub: Hub, files: dict[str, bytes], tmp_path: Path
) -> None:
    cache = tmp_path / "hub"
    prepare(fake, {"model.path": DELETE, "model.hf_cache": str(cache), "model.repo": REPO})
    code, out = fetch(fake, hub)
    assert code == 0, out
    repo = cache / "models--tiny-org--tiny-llama"
    assert (repo / "refs" / "main").read_text() == hub.commit  # what preflight reads for a branch
    snapshot = repo / "snapshots" / hub.commit
    assert {p: (snapshot / p).read_bytes() for p in files} == files
    assert "[2/3] model.safetensors" in out and "run distribute.sh" in out
    # the token went by name: in the container's environment, on no command line, in no output
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in hub.requests if r["path"].startswith(f"/api/models/{REPO}"))
    run = next(argv for _, argv in fake.docker_calls() if argv[:2] == ["run", "--rm"])
    assert "HF_TOKEN" in run and not any(TOKEN in word for word in run) and TOKEN not in out
    report = json.loads(next(line for line in out.splitlines() if line.startswith("SPARKC_FETCH ")).split(" ", 1)[1])
    assert report["ok"] and report["files"] == 3 and report["bytes"] == sum(map(len, files.values()))


def test_into_the_weights_folder_and_a_dropped_connection_resumes(
    fake: FakeCluster, hub: Hub, files: dict[str, bytes], tmp_path: Path
) -> None:
    folder = tmp_path / "weights"
    prepare(fake, {"model.path": str(folder), "model.repo": REPO})
    hub.cut["model.safetensors"] = 11 * MiB
    code, out = fetch(fake, hub)
    assert code == 0, out
    assert {p: (folder / p).read_bytes() for p in files} == files
    gets = [r for r in hub.requests if r["method"] == "GET" and r["path"].endswith("/model.safetensors")]
    assert [r["range"] for r in gets] == ["", f"bytes={10 * MiB}-"]


def test_a_second_run_continues_where_the_first_stopped(
    fake: FakeCluster, hub: Hub, files: dict[str, bytes], tmp_path: Path
) -> None:
    folder = tmp_path / "weights"
    prepare(fake, {"model.path": str(folder), "model.repo": REPO})
    hub.broken.add("sub/tok.json")
    code, out = fetch(fake, hub)
    assert code == 1 and "sub/tok.json" in out and "run fetch-model.sh again to resume" in out
    hub.broken.clear()
    hub.requests.clear()
    code, out = fetch(fake, hub)
    assert code == 0, out
    assert "model.safetensors: 25.2 MB (already here)" in out
    assert [r["path"] for r in hub.requests if r["method"] == "GET" and "/resolve/" in r["path"]] == [
        f"/{REPO}/resolve/main/sub/tok.json"
    ]


def test_without_the_token_the_hub_refuses_and_the_fix_is_named(fake: FakeCluster, hub: Hub, tmp_path: Path) -> None:
    prepare(fake, {"model.path": str(tmp_path / "w"), "model.repo": REPO})
    code, out = fetch(fake, hub, token="")
    assert code == 1 and "is gated" in out and "export HF_TOKEN" in out


def test_refused_when_the_disk_lacks_room(fake: FakeCluster, hub: Hub, tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    prepare(fake, {"model.path": str(folder), "model.repo": REPO})
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    hub.files["model-00002.safetensors"] = b""  # an entry the tree lists with a size beyond the free space
    hub.sizes = {"model-00002.safetensors": free + 10**9}
    code, out = fetch(fake, hub)
    assert code == 1 and "but" in out and "free: free some space" in out, out
    assert not any(r["method"] == "GET" and "/resolve/" in r["path"] for r in hub.requests)


def test_the_plan_and_the_dry_run_name_repo_revision_and_target(fake: FakeCluster, tmp_path: Path) -> None:
    plan = compile_spec(with_changes(example(SOLO), {"model.repo": REPO, "model.revision": "v1.0"})).plan
    assert plan is not None and plan.fetch is not None
    assert (plan.fetch.repo, plan.fetch.revision, plan.fetch.mode) == (REPO, "v1.0", "folder")
    prepare(fake, {"model.path": str(tmp_path / "w"), "model.repo": REPO})
    dry = fake.run("fetch-model.sh", "--dry-run", env={"HF_TOKEN": TOKEN})
    assert dry.returncode == 0, dry.stderr
    assert "-e HF_TOKEN \\" in dry.stdout and TOKEN not in dry.stdout and REPO in dry.stdout
    assert not fake.docker_calls() and not (tmp_path / "w").exists()


def test_no_repo_is_a_usage_error_with_the_fix(fake: FakeCluster) -> None:
    prepare(fake, {"model.repo": DELETE})
    done = fake.run("fetch-model.sh")
    assert done.returncode == 2 and "add model.repo (the Hugging Face repo id, ORG/NAME)" in done.stderr
    dry = fake.run("fetch-model.sh", "--dry-run")
    assert dry.returncode == 2 and not fake.docker_calls()


@pytest.mark.parametrize(("method", "tokens"), [("draft_model", 3), ("dflash", 15)])
def test_a_draft_named_by_its_repo_is_fetched_into_its_own_folder_beside_the_model(
    fake: FakeCluster, hub: Hub, files: dict[str, bytes], tmp_path: Path, method: str, tokens: int
) -> None:
    """model.draft.repo (an imported recipe's draft named by its Hugging Face id): fetch-model.sh downloads
    the draft after the model, into model.draft.path, for distribute.sh to copy on. The stand-in hub serves
    one repo, so the draft is that repo again."""
    weights, draft = tmp_path / "weights", tmp_path / "draft"
    drafted = {"model.draft": {"method": method, "path": str(draft), "repo": REPO, "num_speculative_tokens": tokens}}
    prepare(fake, {"model.path": str(weights), "model.repo": REPO, **drafted})
    code, out = fetch(fake, hub)
    assert code == 0, out
    assert {p: (weights / p).read_bytes() for p in files} == files
    assert {p: (draft / p).read_bytes() for p in files} == files
    assert f"{REPO} at main into {draft} (folder)" in out and "run distribute.sh" in out
    runs = [argv for _, argv in fake.docker_calls() if argv[:2] == ["run", "--rm"]]
    assert len(runs) == 2 and f"{draft}:{draft}" in runs[1]
