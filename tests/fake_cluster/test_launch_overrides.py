"""launch-cluster.sh --env NAME=VALUE and --port N: extra container env, or another API port, for one run,
without compiling again.

Names are checked as the compiler checks the spec's; values are data (never evaluated) and reach
every node's `docker run` as the spec's values do; the run records what it was given.
"""

from __future__ import annotations

import socket

import pytest

from tests.fakes.cluster import FakeCluster, free_port
from tests.specs import with_changes


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
        ("PATH=/x", "--env PATH: the shell's own name, or one starting with SPARKC_"),
        ("SPARKC_TIMEOUT=1", "--env SPARKC_TIMEOUT: the shell's own name, or one starting with SPARKC_"),
        ("LC_ALL=C", "--env LC_ALL: the shell's own name, or one starting with SPARKC_"),
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
    assert "--env 'NAME=VALUE'" in helptext and "--port PORT" in helptext and "sparkc compile" in helptext


# -- --port: the API's port for one launch -------------------------------------------------------

SEED = "seed-qwen35-122b-2spark-ray.yaml"


def _docker_words(fake: FakeCluster) -> list[list[str]]:
    """Every `docker run -d` and `docker exec -d` the launch made, on any node (the probe's excluded)."""
    return [
        argv
        for _, argv in fake.docker_calls()
        if argv[:2] in (["run", "-d"], ["exec", "-d"]) and not fake.is_probe(argv)
    ]


@pytest.mark.parametrize(
    ("example_name", "changes", "carried_by"),
    [
        (SEED, {"container.entrypoint": "bypass", "engine.backend": "native"}, "flag"),
        (SEED, {"container.entrypoint": "bypass"}, "flag"),  # Ray: the engine's words in docker exec
        (SEED, {"container.entrypoint": "adapt"}, "variable"),  # Ray: PORT in the head's container
        (SEED, {"container.entrypoint": "adapt", "engine.backend": "native"}, "variable"),
        ("llama33-70b-2spark-native.yaml", {}, "flag"),  # an entrypoint that runs the command as given
    ],
)
def test_port_moves_the_engine_and_every_probe(
    fake: FakeCluster, example_name: str, changes: dict[str, str], carried_by: str
) -> None:
    spec = with_changes(fake.adapt(example_name), changes)
    fake.compile(spec)
    compiled, port = str(spec["engine"]["port"]), str(free_port())
    launch = fake.run("launch-cluster.sh", "--port", port)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert f":{port}/v1" in launch.stdout and f":{compiled}" not in launch.stdout + launch.stderr
    words = _docker_words(fake)
    assert words and not any(compiled in " ".join(argv) for argv in words)  # no word kept the compiled port
    if carried_by == "flag":  # the engine's `--port N` (Ray's own `ray start --port=N` stays)
        given = [argv[i + 1] for argv in words for i, word in enumerate(argv) if word == "--port"]
        assert given and set(given) == {port}
    else:
        head = words[0] if words[0][0] == "run" else words[1]
        assert f"PORT={port}" in head and not any("--port" in argv for argv in words)
    assert "override.port=" + port + "\n" in (fake.build / "last-launch.txt").read_text()
    # status.sh follows the last launch: the engine listens only on the new port
    status = fake.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f":{port}: healthy" in status.stdout


def test_a_relaunch_at_another_port_needs_yes(fake: FakeCluster) -> None:
    spec = fake.prepare("llama33-70b-2spark-native.yaml")
    port = str(free_port())
    assert fake.run("launch-cluster.sh", "--port", port).returncode == 0
    same = fake.run("launch-cluster.sh", "--port", port)
    assert same.returncode == 0 and "nothing to do" in same.stdout
    compiled = fake.run("launch-cluster.sh")
    assert compiled.returncode == 1
    assert f"records its API on port {port}, this launch asks for port {spec['engine']['port']}" in compiled.stderr
    assert "override.port=" + port in (fake.build / "last-launch.txt").read_text()  # the record stays


def test_the_port_in_use_check_looks_at_the_new_port(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        launch = fake.run("launch-cluster.sh", "--port", port)
    assert launch.returncode == 1
    assert f"the API port {port} is already in use on the head" in launch.stderr
    assert "override.port=" + port in next((fake.build / "logs").iterdir()).joinpath("failure.txt").read_text()


def test_keep_with_an_entrypoint_that_reads_its_own_port_refuses(fake: FakeCluster) -> None:
    spec = with_changes(fake.adapt(SEED), {"container.entrypoint": "keep", "model.mount": "/models/model"})
    fake.compile(spec)
    launch = fake.run("launch-cluster.sh", "--port", "9001")
    assert launch.returncode == 2, launch.stdout + launch.stderr
    assert "the image's entrypoint decides the API port itself" in launch.stderr
    assert "entrypoint: keep: it reads PORT" in launch.stderr and "sparkc compile again" in launch.stderr
    assert fake.calls() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "0"], "--port needs a port number from 1 to 65535, got '0'"),
        (["--port", "65536"], "got '65536'"),
        (["--port", "123456"], "got '123456'"),
        (["--port", "80a"], "got '80a'"),
        (["--port", "-1"], "got '-1'"),
        (["--port", " 80"], "got ' 80'"),
        (["--port", "$(touch CANARY)"], "got '$(touch CANARY)'"),
        (["--port"], "--port needs a port number"),
        (["--port", "9001", "--port", "9002"], "--port is given twice"),
        (["--env", "PORT=9001"], "--env PORT carries the API's port: use --port"),
    ],
)
def test_bad_ports_are_usage_errors(fake: FakeCluster, args: list[str], message: str) -> None:
    fake.prepare(SEED)
    canary = fake.root / "pwned"  # a path of its own: the script runs in the test's working directory
    launch = fake.run("launch-cluster.sh", *(arg.replace("CANARY", str(canary)) for arg in args))
    assert launch.returncode == 2, launch.stdout + launch.stderr
    assert message.replace("CANARY", str(canary)) in launch.stderr
    assert fake.calls() == [] and not canary.exists()


def test_a_port_the_head_uses_otherwise_is_refused(fake: FakeCluster) -> None:
    spec = fake.prepare(SEED)
    for port, what in ((spec["launch"]["ray_port"], "Ray"), (8265, "Ray dashboard")):
        launch = fake.run("launch-cluster.sh", "--port", str(port))
        assert launch.returncode == 2 and f"--port {port} is this deployment's {what} port" in launch.stderr


def test_dry_run_shows_the_new_port(fake: FakeCluster) -> None:
    spec = fake.prepare(SEED)  # adapt, Ray: the variable in both containers (and the probe's, as the engine's env)
    dry = fake.run("launch-cluster.sh", "--dry-run", "--port", "9001")
    assert dry.returncode == 0, dry.stderr
    # Each node's engine container and fabric probe container, one flag per line.
    assert dry.stdout.count("    -e PORT=9001 \\\n") == 4 and f"PORT={spec['engine']['port']}" not in dry.stdout
    assert "curl http://127.0.0.1:9001/health" in dry.stdout


def test_status_reads_the_record_as_data(fake: FakeCluster) -> None:
    spec = fake.prepare("solo-qwen3-32b.yaml")
    assert fake.run("launch-cluster.sh").returncode == 0
    canary = fake.root / "pwned"
    record = fake.build / "last-launch.txt"
    record.write_text(record.read_text() + f"override.port=$(touch {canary})\n")
    status = fake.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr  # the compiled port, where the engine is
    assert "override.port is not a port number" in status.stderr
    assert f":{spec['engine']['port']}: healthy" in status.stdout
    assert not canary.exists()


def test_status_follows_a_failed_launch_to_its_port(fake: FakeCluster) -> None:
    """A launch that started its containers at another port and failed leaves them on the nodes: status.sh
    must look at that port and say the launch failed, not at the port of the launch before."""
    fake.prepare("llama33-70b-2spark-native.yaml")
    first = str(free_port())
    assert fake.run("launch-cluster.sh", "--port", first).returncode == 0
    second = str(free_port())
    fake.set("dies-while-loading", "spark-a")
    failed = fake.run("launch-cluster.sh", "--port", second, "--yes", "--timeout", "120")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    record = (fake.build / "last-launch.txt").read_text()
    assert "state=failed\n" in record and f"override.port={second}\n" in record
    status = fake.run("status.sh")
    assert status.returncode == 1
    assert f"API port {second}, from the last launch" in status.stdout + status.stderr
    assert "the last launch (" in status.stderr and ") failed; its containers are kept" in status.stderr
    assert f":{first}" not in status.stdout + status.stderr
