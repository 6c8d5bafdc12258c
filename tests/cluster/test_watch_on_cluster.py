"""watch.sh on the simulated cluster: a wedged engine, a dead worker container, a worker node that went
away and came back, and a restart budget that runs out. One Ray deployment, launched once and shared;
each test starts from a serving deployment (relaunched only where an earlier one left it broken).

Short --interval and --deadline keep each test to seconds of watching; the restarts are real launches
(two allowed, so that one launch that fails on a loaded machine is tried again, as the watch would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import HELLOHAL_IMAGE
from tests.cluster.conftest import HELLOHAL_REAL
from tests.cluster.deployment import Deployment, sim_spec

pytestmark = pytest.mark.cluster

NAME = "watched"
HEAD, WORKER = "spark1", "spark2"
FAST = ("--interval", "2", "--deadline", "3", "--backoff", "1")
# What watch.on_failure was told, one line per run, into a file beside the scripts.
HOOK = 'printf "%s|%s|%s|%s\\n" "$SPARKC_WATCH_KIND" "$SPARKC_WATCH_NODE" "$SPARKC_DEPLOYMENT" "$SPARKC_WATCH_FAILURE"'


@pytest.fixture(scope="module")
def watched(
    sim_cluster: SimCluster, sim_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    for node in sim_cluster.nodes:
        sim_cluster.docker(node.name, "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)
    build = tmp_path_factory.mktemp("watch") / "build"
    hook = f"{HOOK} >> {build}/hook.txt"
    spec = sim_spec(
        sim_cluster, "seed-qwen35-122b-2spark-ray.yaml", NAME, 2, sim_model_dir, {"watch": {"on_failure": hook}}
    )
    d = Deployment(sim_cluster, spec, build)
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    yield d
    d.remove()


@pytest.fixture
def serving(watched: Deployment) -> Deployment:
    """The deployment, serving: relaunched where an earlier test left it broken."""
    if watched.run("watch.sh", "--once", "--deadline", "10").returncode != 0:
        launch = watched.run("launch-cluster.sh", "--yes")
        assert launch.returncode == 0, launch.stdout + launch.stderr
    (watched.build / "hook.txt").unlink(missing_ok=True)
    return watched


class Watcher:
    """watch.sh running in the background on the head, its output in a file beside the scripts."""

    def __init__(self, d: Deployment, *args: str) -> None:
        self.d = d
        self.out = d.build / f"watch-{time.monotonic_ns()}.out"
        started = d.cluster.exec(
            HEAD,
            [
                "bash",
                "-c",
                'setsid bash "$0" "$@" >"$WATCH_OUT" 2>&1 </dev/null & echo $!',
                str(d.build / "watch.sh"),
                *args,
            ],
            env={"WATCH_OUT": str(self.out)},
            check=True,
        )
        self.pid = int(started.stdout.strip())

    def text(self) -> str:
        return self.out.read_text() if self.out.exists() else ""

    def wait_for(self, *texts: str, timeout: float) -> float:
        """Seconds until every text is in the output, in order; fails after `timeout`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            out, at = self.text(), 0
            for text in texts:
                at = out.find(text, at)
                if at < 0:
                    break
            else:
                return time.monotonic() - start
            time.sleep(0.5)
        pytest.fail(f"watch.sh did not say {texts} within {timeout}s:\n{self.text()}")

    def stop(self) -> None:
        self.d.cluster.exec(HEAD, ["kill", "--", f"-{self.pid}"])


def kept_failures(d: Deployment) -> list[str]:
    return [(p / "failure.txt").read_text() for p in d.saved_logs() if (p / "failure.txt").exists()]


def test_a_wedged_engine_is_found_within_interval_and_deadline_its_logs_kept_and_it_serves_again(
    serving: Deployment,
) -> None:
    d = serving
    d.cluster.docker(HEAD, "exec", d.container(HEAD), "sh", "-c", "echo 0 > /tmp/sparkc-standin-wedge", check=True)
    once = d.run("watch.sh", "--once", "--deadline", "3")
    assert once.returncode == 1, once.stdout + once.stderr
    wedge = "the engine is wedged: /health answers but a one-token generation did not answer within 3 s"
    assert wedge in once.stderr
    assert once.elapsed < 2 + 3 + 15, once.elapsed  # interval + deadline, and the round's own checks

    watcher = Watcher(d, *FAST, "--max-restarts", "2")
    try:
        found = watcher.wait_for(wedge, timeout=2 + 3 + 30)
        assert found < 2 + 3 + 30
        watcher.wait_for(wedge, "logs of every node kept in", "restarting", "restarted", "is healthy", timeout=300)
    finally:
        watcher.stop()
    assert "kind=wedge\nnode=spark1\n" in kept_failures(d)[-1]
    saved = d.saved_logs()[-1]
    assert "wedged after" in (saved / f"{HEAD}.log").read_text()  # the engine's own log, kept before the restart
    assert (d.build / "hook.txt").read_text().startswith(f"wedge|{HEAD}|{NAME}|the engine is wedged")
    assert d.run("watch.sh", "--once").returncode == 0  # a new engine: generations answer again


def test_a_dead_worker_container_is_found_and_the_deployment_recovered(serving: Deployment) -> None:
    d = serving
    d.cluster.docker(WORKER, "kill", d.container(WORKER), check=True)
    watcher = Watcher(d, *FAST, "--max-restarts", "2")
    try:
        watcher.wait_for(
            f"the container {d.container(WORKER)} on {WORKER} is exited, not running",
            "restarted",
            "is healthy",
            timeout=300,
        )
    finally:
        watcher.stop()
    assert d.run("status.sh").returncode == 0


def test_a_worker_node_that_went_away_is_waited_for_and_recovered_once_it_is_back(serving: Deployment) -> None:
    d = serving
    # The node's processes gone: its container and its sshd (dockerd comes back with the node, as after a boot).
    d.cluster.docker(WORKER, "rm", "-f", d.container(WORKER), check=True)
    d.cluster.break_sshd(WORKER)
    watcher, back = Watcher(d, *FAST, "--max-restarts", "2"), False
    try:
        watcher.wait_for(f"{WORKER} does not answer over ssh", f"waiting for {WORKER}", timeout=60)
        time.sleep(5)
        assert "restarting watched" not in watcher.text()  # no restart is spent on a node that is not there
        d.cluster.restore_sshd(WORKER)
        back = True
        watcher.wait_for("every node answers over ssh again", "restarted", "is healthy", timeout=300)
    finally:
        watcher.stop()
        if not back:
            d.cluster.restore_sshd(WORKER)
    assert d.run("status.sh").returncode == 0


def test_the_restart_budget_ends_in_a_failure_and_the_hook_hears_of_it(serving: Deployment) -> None:
    d = serving
    d.cluster.docker(WORKER, "kill", d.container(WORKER), check=True)
    watch = d.run("watch.sh", *FAST, "--max-restarts", "0", timeout=120)
    assert watch.returncode == 1, watch.stdout + watch.stderr
    assert "still failing after 0 restart(s) within 3600s" in watch.stderr and "stops trying" in watch.stderr
    lines = [line.split("|", 3) for line in (d.build / "hook.txt").read_text().splitlines()]
    assert [line[:3] for line in lines] == [["container", WORKER, NAME], ["budget", WORKER, NAME]]
    assert f"the container {d.container(WORKER)} on {WORKER} is exited" in lines[0][3]
