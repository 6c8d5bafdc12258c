"""container.mounts under ~/ on the fakes: each node's `docker run -v` (the engine's and the probe's) gets that
node's own home, its ssh user's (the head's: the launching user's), asked once per node; a dry run names it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.fake_cluster.test_dry_run import bare_path
from tests.fakes.cluster import FakeCluster
from tests.specs import compile_into, dry_commands, example, flag_values, with_changes

NATIVE = "llama33-70b-2spark-native.yaml"  # spark-a the head (local), spark-b over ssh
CACHE = {"host": "~/.cache/vllm", "container": "/root/.cache/vllm", "readonly": False}


def _prepared(fake: FakeCluster, tmp_path: Path) -> tuple[Path, Path]:
    """The native example with a mount under ~/, each node with a home of its own that holds the folder."""
    spec: dict[str, Any] = with_changes(fake.adapt(NATIVE), {"container.mounts": [CACHE]})
    fake.compile(spec)
    head, worker = tmp_path / "home-head", tmp_path / "home-worker"
    for home in (head, worker):
        (home / ".cache" / "vllm").mkdir(parents=True)
    fake.set_home("spark-b", worker)
    return head, worker


def test_each_node_mounts_its_own_ssh_users_home(fake: FakeCluster, tmp_path: Path) -> None:
    head, worker = _prepared(fake, tmp_path)
    launch = fake.run("launch-cluster.sh", env={"HOME": str(head)})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    for node, home in (("spark-a", head), ("spark-b", worker)):
        runs = [argv for _, argv in fake.docker_calls(node) if argv[:2] == ["run", "-d"]]
        assert len(runs) == 2 and any(fake.is_probe(argv) for argv in runs)  # the engine's container and the probe
        for argv in runs:
            assert f"{home}/.cache/vllm:/root/.cache/vllm" in flag_values(argv, "-v"), argv
            assert not any(v.startswith("~") for v in flag_values(argv, "-v"))
    asked = [c for c in fake.calls() if c.startswith("ssh ") and c.endswith(" cd && pwd")]
    assert len(asked) == 1 and "spark-b" in asked[0]  # the worker once; the head is this machine
    assert f"spark-b: ~/ is {worker}" in launch.stdout + launch.stderr


def test_preflight_looks_for_the_folder_in_each_nodes_home(fake: FakeCluster, tmp_path: Path) -> None:
    head, worker = _prepared(fake, tmp_path)
    shutil.rmtree(worker / ".cache")
    launch = fake.run("launch-cluster.sh", "--preflight-only", env={"HOME": str(head)})
    said = launch.stdout + launch.stderr
    assert launch.returncode != 0
    assert f"mount source {worker}/.cache/vllm does not exist on spark-b" in said, said
    assert f"{head}/.cache/vllm does not exist" not in said


def test_a_dry_run_names_each_nodes_home_without_asking(tmp_path: Path) -> None:
    spec = with_changes(example(NATIVE.removesuffix(".yaml")), {"container.mounts": [CACHE]})
    compile_into(spec, tmp_path / "build")
    done = subprocess.run(
        [shutil.which("bash") or "bash", str(tmp_path / "build" / "launch-cluster.sh"), "--dry-run"],
        env={"PATH": bare_path(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for node in ("spark-a", "spark-b"):
        mounts = [
            v
            for argv in dry_commands(done.stdout, node)
            if argv[:2] == ["docker", "run"]
            for v in flag_values(argv, "-v")
        ]
        assert f"<home of the ssh user on {node}>/.cache/vllm:/root/.cache/vllm" in mounts, done.stdout
