"""distribute.sh on the simulated cluster: real docker save/load, real ssh streams on the fabric.

Each node has its own dockerd; the nodes share the host's files except /run, so the model folder
lives under /run to be a different folder on each node.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy, Deployment
from tests.specs import DELETE

pytestmark = pytest.mark.cluster

MODEL = "/run/sparkc-dist-model"
FILES = {"config.json": 200, "model-00001.safetensors": 3_000_000, "tokenizer.json": 50_000}


@pytest.fixture
def model_dirs(sim_cluster: SimCluster) -> Iterator[None]:
    yield
    for node in sim_cluster.nodes:
        sim_cluster.exec(node.name, ["rm", "-rf", MODEL])


def make_model(cluster: SimCluster, node: str) -> None:
    script = f"mkdir -p {MODEL}/sub && " + " && ".join(
        f"head -c {size} /dev/urandom > {MODEL}/{name}" for name, size in FILES.items()
    )
    cluster.sh(node, script + f" && echo x > {MODEL}/sub/extra", check=True)


@contextmanager
def throttled(cluster: SimCluster, rate: str) -> Iterator[None]:
    """The head's fabric egress limited to RATE (tc's token bucket), as a slow link would be."""
    head = cluster.head
    qdisc = ["ip", "netns", "exec", head.netns, "tc", "qdisc"]
    limit = ["root", "tbf", "rate", rate, "burst", "256kb", "latency", "400ms"]
    subprocess.run([*qdisc, "add", "dev", head.fabric_netdev, *limit], check=True)
    try:
        yield
    finally:
        subprocess.run([*qdisc, "del", "dev", head.fabric_netdev, "root"], check=True)


def report(d: Deployment) -> dict[tuple[str, str], dict[str, str]]:
    lines = (d.build / "distribute-report.txt").read_text().splitlines()
    entries = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in lines]
    return {(e["node"], e["item"]): e for e in entries}


def image_ids(cluster: SimCluster, d: Deployment) -> list[str | None]:
    return [cluster.image_id(node, VLLM_IMAGE) for node in d.nodes]


def test_copies_what_a_node_lacks_and_skips_what_matches(
    deploy: Deploy, sim_cluster: SimCluster, model_dirs: None
) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "dist",
        {"container.image": VLLM_IMAGE, "model.architecture": DELETE, "model.path": MODEL},
        nodes=3,
    )
    make_model(sim_cluster, "spark1")
    make_model(sim_cluster, "spark3")  # other bytes, same names and sizes: the head/tail checksums differ
    sim_cluster.break_remove_image("spark2", VLLM_IMAGE)
    head_id = sim_cluster.image_id("spark1", VLLM_IMAGE)

    dry = d.run("distribute.sh", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "spark2: image missing: copy" in dry.stdout and "spark3: image" in dry.stdout
    # Over each worker's fabric address, from the head (a switch: every worker one hop away).
    assert "[spark1] copy image to spark2 from spark1 over root@10.78.0.12 in up to 8 streams" in dry.stdout
    assert "[spark1] copy model to spark3 from spark1 over root@10.78.0.13 in up to 8 streams" in dry.stdout
    assert sim_cluster.image_id("spark2", VLLM_IMAGE) is None  # a dry run copies nothing

    with throttled(sim_cluster, "80mbit"):  # about 10 MB/s: the image takes seconds, so progress shows
        run = d.run("distribute.sh", "--progress", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert image_ids(sim_cluster, d) == [head_id] * 3
    total = sim_cluster.docker("spark1", "image", "inspect", "--format", "{{.Size}}", VLLM_IMAGE).stdout.strip()
    size = int(total) // 1_000_000
    # One pass for both: spark2 lacks the image and the model, spark3 the model (3 MB beside the image).
    shown = re.findall(
        r"spark2 spark3: image and model: (\d+) MB sent of about (\d+) MB \((\d+)%\), \d+\.\d MB/s", run.stdout
    )
    sent = [int(mb) for mb, _, _ in shown]
    assert len(sent) >= 2 and sent == sorted(sent) and sent[-1] > 0, run.stdout  # a line a second, growing
    assert all(abs(int(of) - size) <= size // 5 for _, of, _ in shown), run.stdout  # docker's size, then the archive's
    assert all(int(percent) <= 99 for _, _, percent in shown), run.stdout  # 100% is the line that says loaded
    got = report(d)
    assert got["spark2", "image"]["action"] == "copied" and got["spark2", "image"]["via"] == "spark1"
    assert int(got["spark2", "image"]["bytes"]) > 50_000_000  # the whole image went over the stream
    assert got["spark3", "image"]["action"] == "skipped"
    assert got["spark2", "model"]["action"] == "copied" and int(got["spark2", "model"]["bytes"]) > sum(FILES.values())
    assert got["spark3", "model"]["action"] == "copied"
    assert re.search(r"spark2: image copied, \d+ bytes in \d+s \(\d+\.\d MB/s\) from spark1", run.stdout)

    again = d.run("distribute.sh")
    assert again.returncode == 0 and {e["action"] for e in report(d).values()} == {"skipped"}


def test_image_goes_down_a_chain_and_replaces_another_build(
    deploy: Deploy, sim_cluster: SimCluster, model_dirs: None
) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "chain",
        {"container.image": VLLM_IMAGE, "model.architecture": DELETE, "model.path": MODEL},
        nodes=3,
    )
    head_id = sim_cluster.image_id("spark1", VLLM_IMAGE)
    sim_cluster.break_remove_image("spark2", VLLM_IMAGE)
    other = sim_cluster.break_swap_image("spark3", VLLM_IMAGE)  # same tag, another build
    assert other != head_id
    # spark2 checks spark3's host key against the head's record of it: nothing to set up on spark2.
    run = d.run("distribute.sh", "--image-only", "--chain")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "spark3: image " + other.split(":")[1][:12] + " differs: copy" in run.stdout, run.stdout
    assert image_ids(sim_cluster, d) == [head_id] * 3
    got = report(d)
    # The head sends one copy: spark2 keeps it and passes the same bytes on to spark3.
    assert got["spark2", "image"]["via"] == "spark1" and got["spark3", "image"]["via"] == "spark2"
    assert got["spark2", "image"]["bytes"] == got["spark3", "image"]["bytes"]
    assert ("spark2", "model") not in got  # --image-only
    assert d.run("distribute.sh", "--image-only", "--model-only").returncode == 2


DRAFT = "/run/sparkc-dist-draft"


def test_a_draft_models_folder_is_copied_beside_the_weights(
    deploy: Deploy, sim_cluster: SimCluster, model_dirs: None
) -> None:
    d = deploy(
        "llama33-70b-draft-2spark.yaml",
        "distdraft",
        {
            "container.image": VLLM_IMAGE,
            "model.hf_cache": DELETE,
            "model.repo": DELETE,
            "model.revision": DELETE,
            "model.architecture": DELETE,
            "model.path": MODEL,
            "model.draft.path": DRAFT,
        },
    )
    make_model(sim_cluster, "spark1")
    sim_cluster.sh("spark1", f"mkdir -p {DRAFT} && head -c 70000 /dev/urandom > {DRAFT}/draft.safetensors", check=True)
    try:
        dry = d.run("distribute.sh", "--model-only", "--dry-run")
        assert "[spark1] copy draft to spark2 from spark1 over root@10.78.0.12" in dry.stdout, dry.stdout
        run = d.run("distribute.sh", "--model-only")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "== draft model folder " + DRAFT in run.stdout
        assert sim_cluster.sh("spark2", f"stat -c %s {DRAFT}/draft.safetensors").stdout.strip() == "70000"
        got = report(d)
        assert got["spark2", "model"]["action"] == "copied" and got["spark2", "draft"]["action"] == "copied"
        assert int(got["spark2", "draft"]["bytes"]) == 70_000  # the file's bytes, nothing more
        sim_cluster.sh("spark1", f"rm -rf {DRAFT}", check=True)  # gone from the head: said, and a failure
        gone = d.run("distribute.sh", "--model-only")
        assert gone.returncode == 1 and f"draft folder {DRAFT} is not on the head, spark1" in gone.stdout + gone.stderr
    finally:
        for node in sim_cluster.nodes:
            sim_cluster.exec(node.name, ["rm", "-rf", DRAFT])
