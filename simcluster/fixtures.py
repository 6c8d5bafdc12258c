"""pytest fixtures for tests on the simulated cluster: the simulator's own (simcluster/tests) and
sparkc's (tests/cluster). tests/conftest.py registers them once, so the session cluster is made once.

``sim_cluster`` (session): three nodes, spark1 (head) and spark2 with fabric netdev enp1s0f1np1,
spark3 with enp1s0f0np0, the test images loaded on all; the head's known_hosts lists every node's host
key under its management IP. When this machine cannot host it (not
root, tools missing), tests using it fail with the reason under CI (env CI set) and skip otherwise.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import pytest

from . import ClusterUnavailable, NodeSpec, SimCluster, docker_mount_args, preflight

HEAD_NETDEV = "enp1s0f1np1"
ODD_NETDEV = "enp1s0f0np0"  # spark3 is cabled to the other port twin (DOMAIN: F3)
MODEL_IN_CONTAINER = "/models/tiny"
# Not the CLI default, so a by-hand cluster survives a test run; SPARKC_SIM_NAME lets two test runs on one
# machine (two work trees) keep apart, and each pytest-xdist worker (`pytest -n 2`) makes its own cluster.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
CLUSTER_NAME = os.environ.get("SPARKC_SIM_NAME", "sparkc-test") + (f"-{_WORKER}" if _WORKER else "")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skips the test saying why the cluster cannot be made here; under CI, fails it instead."""
    msg = f"simulated cluster unavailable: {reason}"
    if _in_ci():
        pytest.fail(msg + "\n(CI is set, so this is a failure; run: bash simcluster/install.sh)", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def sim_cluster() -> Iterator[SimCluster]:
    problems = preflight()
    if problems:
        unavailable("; ".join(problems))
    cluster = SimCluster(
        [NodeSpec("spark1"), NodeSpec("spark2"), NodeSpec("spark3", fabric_netdev=ODD_NETDEV)],
        name=CLUSTER_NAME,
    )
    try:
        cluster.up()
    except ClusterUnavailable as exc:
        unavailable(str(exc))
    # The head knows every node's host key by its management address, as after the operator's first,
    # checked ssh to each (what setup-fabric asks for); nothing else is in any known_hosts.
    cluster.record_host_keys(cluster.head)
    yield cluster
    cluster.teardown()


@pytest.fixture(scope="session")
def sim_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model directory (config only); the nodes see the host's /tmp, so it is on every node."""
    path = tmp_path_factory.mktemp("model")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_attention_heads": 6,
        "num_key_value_heads": 6,
        "max_position_embeddings": 16384,
    }
    (path / "config.json").write_text(json.dumps(config))
    path.chmod(0o755)
    return path


Runner = Callable[..., "Container"]


class Container:
    def __init__(self, cluster: SimCluster, node: str, name: str) -> None:
        self.cluster, self.node, self.name = cluster, node, name

    def logs(self) -> str:
        res = self.cluster.docker(self.node, "logs", self.name, timeout=30)
        return res.stdout + res.stderr

    def state(self) -> tuple[str, int]:
        res = self.cluster.docker(self.node, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", self.name)
        status, code = res.stdout.split()
        return status, int(code)

    def wait_exit(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, code = self.state()
            if status in ("exited", "dead"):
                return code
            time.sleep(0.5)
        raise AssertionError(f"{self.name} on {self.node} still running after {timeout:.0f} s:\n{self.logs()}")


@pytest.fixture
def run_container(sim_cluster: SimCluster, sim_model_dir: Path) -> Iterator[Runner]:
    """Starts detached containers the way sparkc's launcher does; removes them after the test."""
    started: list[Container] = []

    def run(
        node: str,
        image: str,
        argv: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        entrypoint: str | None = None,
        gpus: bool = True,
        via_ssh: bool = False,
    ) -> Container:
        name = f"t-{uuid.uuid4().hex[:8]}"
        args = [
            "run",
            "-d",
            "--name",
            name,
            "--network",
            "host",
            "--ipc=host",
            "--cap-add",
            "IPC_LOCK",
            *docker_mount_args(),
            "-v",
            f"{sim_model_dir}:{MODEL_IN_CONTAINER}:ro",
        ]
        if gpus:
            args += ["--gpus", "all"]
        if entrypoint is not None:
            args += ["--entrypoint", entrypoint]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        args += [image, *argv]
        if via_ssh:  # as the launcher reaches workers: ssh from the head, docker on the worker
            res = sim_cluster.ssh(sim_cluster.head.name, node, ["docker", *args], timeout=60)
        else:
            res = sim_cluster.exec(node, ["docker", *args], timeout=60)
        assert res.returncode == 0, f"docker run on {node} failed: {res.stderr}"
        container = Container(sim_cluster, node, name)
        started.append(container)
        return container

    yield run
    for c in started:
        sim_cluster.docker(c.node, "rm", "-f", c.name, timeout=60)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> float:
    """Polls ``predicate`` until true; returns the seconds it took, or fails naming ``what``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start
