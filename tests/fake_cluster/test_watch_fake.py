"""watch.sh against the fake ssh and docker: one round (--once), the evidence kept on a failure, the
restarts within the budget, watch.on_failure with the failure in its environment, the dry run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.fakes.cluster import BIN, FakeCluster
from tests.specs import with_changes

SEED = "seed-qwen35-122b-2spark-ray.yaml"
WORKER = "sparkc-qwen35-122b-spark-b"
# A hook that writes what it was told, one NAME=VALUE a line, to the file named by HOOK_OUT.
HOOK = 'printf "%s|%s|%s|%s|%s\\n" "$SPARKC_WATCH_KIND" "$SPARKC_WATCH_NODE" "$SPARKC_DEPLOYMENT" ' + (
    '"$SPARKC_WATCH_FAILURE" "$SPARKC_WATCH_LOGS" >> "$HOOK_OUT"'
)


def launched(fake: FakeCluster, changes: dict[str, object] | None = None) -> dict[str, object]:
    spec = fake.adapt(SEED)
    if changes:
        spec = with_changes(spec, changes)
    fake.compile(spec)
    launch = fake.run("launch-cluster.sh", timeout=300)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    return spec


def stop_worker(fake: FakeCluster) -> None:
    """The worker's engine dies: its container exits, as docker reports it."""
    env = {**os.environ, "FAKE_STATE": str(fake.state), "FAKE_NODE": "spark-b"}
    subprocess.run([str(BIN / "docker"), "stop", WORKER], env=env, check=True, capture_output=True, timeout=30)


def launches(fake: FakeCluster) -> int:
    return sum(1 for node, argv in fake.docker_calls("spark-b") if argv[:2] == ["run", "-d"])


def test_once_is_0_on_a_healthy_deployment_and_1_naming_the_node_whose_container_died(fake: FakeCluster) -> None:
    launched(fake)
    healthy = fake.run("watch.sh", "--once")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "is healthy" in healthy.stdout
    stop_worker(fake)
    before = launches(fake)
    broken = fake.run("watch.sh", "--once")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert f"(container on spark-b): the container {WORKER} on spark-b is exited, not running" in broken.stderr
    assert launches(fake) == before and not (fake.build / "logs").exists()  # --once restarts nothing, keeps nothing


def test_a_failure_keeps_the_logs_restarts_within_the_budget_then_gives_up_running_the_hook(
    fake: FakeCluster, tmp_path: Path
) -> None:
    launched(fake, {"watch": {"on_failure": HOOK}})
    stop_worker(fake)
    fake.set("run-fails", "spark-b")  # every launch after it fails: the budget runs out
    before = launches(fake)
    hook_out = tmp_path / "hook.txt"
    watch = fake.run(
        "watch.sh",
        "--interval",
        "1",
        "--max-restarts",
        "1",
        "--backoff",
        "1",
        env={"HOOK_OUT": str(hook_out)},
        timeout=400,
    )
    output = watch.stdout + watch.stderr
    assert watch.returncode == 1, output
    assert launches(fake) == before + 1, output  # one restart: a launch, which fails
    assert "restarting qwen35-122b: stop-cluster.sh, then launch-cluster.sh" in watch.stdout
    assert "still failing after 1 restart(s) within 3600s" in watch.stderr and "stops trying" in watch.stderr
    # the evidence of the first failure, before any restart: every node's log and what failed
    kept = sorted(p for p in (fake.build / "logs").iterdir() if (p / "failure.txt").exists())
    first = kept[0]
    assert "kind=container\nnode=spark-b\n" in (first / "failure.txt").read_text()
    assert (first / "spark-a.log").exists() and "ray start" in (first / "spark-b.log").read_text()
    # the hook: once per failure found (the first one, then after the failed restart), then for the budget
    lines = [line.split("|") for line in hook_out.read_text().splitlines()]
    assert [line[0] for line in lines] == ["container", "container", "budget"], lines
    assert lines[0][1] == "spark-b" and lines[0][2] == "qwen35-122b"
    assert f"the container {WORKER} on spark-b is exited, not running" in lines[0][3]
    assert lines[0][4] == str(first)
    assert "still failing after 1 restart(s)" in lines[-1][3]


def test_dry_run_prints_the_checks_and_the_restart_and_touches_nothing(fake: FakeCluster) -> None:
    fake.prepare(SEED)
    dry = fake.run("watch.sh", "--dry-run", "--interval", "5")
    assert dry.returncode == 0, dry.stderr
    assert f"[spark-b] docker inspect --format '{{{{.State.Status}}}}' {WORKER}" in dry.stdout
    # (the dry run folds a long command line with " \\" and an indent, as the other scripts' dry runs do)
    shown = re.sub(r" \\\n +", " ", dry.stdout)
    assert f"[spark-a] bash {fake.build}/launch-cluster.sh --yes" in shown, dry.stdout
    assert "every 5s" in dry.stdout
    assert not fake.docker_calls() and not fake.ssh_calls()


def test_usage_errors_exit_2(fake: FakeCluster) -> None:
    fake.prepare(SEED)
    for args, said in (
        (["--interval", "soon"], "--interval needs whole seconds"),
        (["--deadline", "0"], "at least 1 second"),
        (["--forever"], "unknown option: --forever"),
    ):
        result = fake.run("watch.sh", *args)
        assert result.returncode == 2 and said in result.stderr, (args, result.stderr)
    assert "Usage: watch.sh" in fake.run("watch.sh", "-h").stdout
