"""The launcher's watch over the containers (docker events, one per node), against the fakes: a death
during the wait is reported naming its container, one before the watch began is replayed, a node
whose watch cannot run is inspected instead, and no watch outlives the launcher."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fakes.cluster import FakeCluster
from tests.security.harness import write_functions
from tests.specs import compile_spec, example

NATIVE = "llama33-70b-2spark-native.yaml"
RAY = "seed-qwen35-122b-2spark-ray.yaml"
EXIT_FILE = ["exec", "sparkc-qwen35-122b-spark-a", "cat", "/tmp/sparkc-engine.exit"]


def watches_left(fake: FakeCluster) -> list[str]:
    """`docker events`, `docker logs` and grep processes of this fake cluster still running (by their
    FAKE_STATE)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        watching = b"events" in argv or b"logs" in argv or any(b"engine exited" in a for a in argv)
        if watching and f"FAKE_STATE={fake.state}".encode() in env:
            found.append(proc.name)
    return found


def test_a_container_dying_while_the_engine_loads_fails_the_launch_naming_it(fake: FakeCluster) -> None:
    fake.prepare(NATIVE)
    fake.set("dies-while-loading", "spark-a")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    container = fake.container("spark-a", next(iter(fake.containers("spark-a"))))
    assert container is not None
    assert f"FAILED in phase readiness on node spark-a: container {container['name']} is exited on spark-a" in (
        launch.stderr
    )
    assert "died while loading (fake)" in launch.stderr  # the node's last log lines
    # Seen through the watch: the containers were not inspected while the engine loaded.
    state = "{{.State.Status}} {{.State.FinishedAt}}"
    inspections = [argv for _, argv in fake.docker_calls() if argv[:3] == ["inspect", "--format", state]]
    assert len(inspections) == 2  # once per node, when the death was reported
    assert not watches_left(fake)


def test_a_container_dead_before_its_watch_began_is_replayed(fake: FakeCluster) -> None:
    fake.prepare(NATIVE)
    fake.set("crash", "spark-a")  # dies inside `docker run`, before its watch starts
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "FAILED in phase readiness on node spark-a: container sparkc-" in launch.stderr
    assert "is exited on spark-a" in launch.stderr
    assert not watches_left(fake)


def test_without_docker_events_the_containers_are_inspected_instead(fake: FakeCluster) -> None:
    fake.prepare(NATIVE)
    fake.set("events-fail")
    fake.set("dies-while-loading", "spark-a")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "docker events ended (Error response from daemon: events are not available (fake)" in launch.stderr
    assert "FAILED in phase readiness on node spark-a: container sparkc-" in launch.stderr
    assert "is exited on spark-a" in launch.stderr


def test_watches_end_with_a_launch_that_succeeds(fake: FakeCluster) -> None:
    fake.prepare(NATIVE)
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 0, launch.stderr
    assert "No such file" not in launch.stderr  # the watches end quietly after the launcher
    watched = [argv for _, argv in fake.docker_calls() if argv[:1] == ["events"]]
    ids = {fake.container(node, fake.containers(node)[0])["id"] for node in ("spark-a", "spark-b")}  # type: ignore[index]
    assert {argv[argv.index("--filter") + 1] for argv in watched} == {f"container={i}" for i in ids}
    assert not watches_left(fake)


def test_a_ray_engine_that_exits_is_seen_in_its_log(fake: FakeCluster) -> None:
    fake.prepare(RAY)
    fake.set("crash", "spark-a")  # the engine, exec'd under Ray, exits; its container runs on
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "FAILED in phase readiness on node spark-a: the engine exited with status 1" in launch.stderr
    assert ["logs", "-f", "sparkc-qwen35-122b-spark-a"] in [argv for _, argv in fake.docker_calls("spark-a")]
    assert EXIT_FILE not in [argv for _, argv in fake.docker_calls("spark-a")]  # told by the log, not polled
    assert not watches_left(fake)


def test_without_docker_logs_the_exit_file_is_read_instead(fake: FakeCluster) -> None:
    fake.prepare(RAY)
    fake.set("logs-fail")
    fake.set("crash", "spark-a")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "the engine's log watch ended (docker logs -f ended with status 1 before the engine did" in launch.stderr
    assert "FAILED in phase readiness on node spark-a: the engine exited with status 1" in launch.stderr
    assert EXIT_FILE in [argv for _, argv in fake.docker_calls("spark-a")]


def test_the_engine_watch_ends_with_a_ray_launch_that_succeeds(fake: FakeCluster) -> None:
    fake.prepare(RAY)
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 0, launch.stderr
    assert "log watch ended" not in launch.stderr
    # One look at the exit file, when the endpoint answered; none while it loaded.
    assert [argv for _, argv in fake.docker_calls("spark-a")].count(EXIT_FILE) == 1
    assert not watches_left(fake)


def test_the_container_that_stopped_first_is_told_by_its_time_not_by_how_docker_wrote_it(tmp_path: Path) -> None:
    """docker leaves trailing zeros out of FinishedAt: as text, 12:44:03.5Z sorts after 12:44:03.51Z."""
    files = compile_spec(example("llama33-70b-2spark-native")).files
    functions = tmp_path / "launch-functions.sh"
    write_functions(files["launch-cluster.sh"], functions, files["deployment.sh"])
    times = ["2026-12-01T12:44:03.51Z", "2026-12-01T12:44:03.5Z", "2026-12-01T12:44:03Z", "2026-12-01T12:44:02.999Z"]
    script = 'source "$1"; shift; for t; do sortable_time "$t"; echo; done'
    done = subprocess.run(["bash", "-c", script, "bash", str(functions), *times], capture_output=True, text=True)
    sortable = done.stdout.split()
    assert sortable == [
        "2026-12-01T12:44:03.510000000Z",
        "2026-12-01T12:44:03.500000000Z",
        "2026-12-01T12:44:03.000000000Z",
        "2026-12-01T12:44:02.999000000Z",
    ], done.stderr
    assert sorted(sortable) == [sortable[i] for i in (3, 2, 1, 0)]
