"""launch-cluster.sh --env NAME=VALUE: extra container env for one run, without compiling again.

Names are checked as the compiler checks the spec's; values are data (never evaluated) and reach
every node's `docker run` as the spec's values do; the run records what it was given.
"""

from __future__ import annotations

import pytest

from tests.fakes.cluster import FakeCluster


def test_an_extra_variable_reaches_every_node_as_data(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    canary = fake.root / "pwned"
    value = f"a b; $(touch {canary}) 'q' `touch {canary}`"
    launch = fake.run("launch-cluster.sh", "--env", f"VLLM_LOGGING_LEVEL={value}", "--env", "EMPTY=")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    for node, container in (("spark-a", "sparkc-qwen35-122b-spark-a"), ("spark-b", "sparkc-qwen35-122b-spark-b")):
        env = fake.container(node, container)["env"]
        assert env["VLLM_LOGGING_LEVEL"] == value and env["EMPTY"] == ""
    assert not canary.exists()
    recorded = (fake.build / "last-launch.txt").read_text()
    assert "override.env=VLLM_LOGGING_LEVEL\n" in recorded and "override.env=EMPTY\n" in recorded
    assert value not in recorded  # names only: a value may be anything the user typed


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("novalue", "--env needs 'NAME=VALUE'"),
        ("lower=1", "--env lower: names are upper-case"),
        ("1X=1", "--env 1X: names are upper-case"),
        ("PATH=/x", "--env PATH: a name the shell or the generated scripts use"),
        ("TIMEOUT=1", "--env TIMEOUT: a name the shell or the generated scripts use"),
        ("HF_TOKEN=x", "--env HF_TOKEN looks like a secret"),
        ("NCCL_SOCKET_IFNAME=eth9", "--env NCCL_SOCKET_IFNAME is set by the compiled plan"),
    ],
)
def test_names_are_checked_before_anything_runs(fake: FakeCluster, item: str, message: str) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    launch = fake.run("launch-cluster.sh", "--env", item)
    assert launch.returncode == 2, launch.stdout + launch.stderr
    assert message in launch.stderr
    assert fake.calls() == []


def test_dry_run_shows_the_extra_variable(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    dry = fake.run("launch-cluster.sh", "--dry-run", "--env", "VLLM_LOGGING_LEVEL=DEBUG")
    assert dry.returncode == 0, dry.stderr
    assert "    -e VLLM_LOGGING_LEVEL=DEBUG \\\n" in dry.stdout


def test_help_says_what_still_needs_a_compile(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    helptext = fake.run("launch-cluster.sh", "--help").stdout
    assert "--env 'NAME=VALUE'" in helptext and "sparkc compile" in helptext
