"""launch-cluster.sh --port on the simulated cluster: the engine serves on the new port, nothing
serves on the compiled one, and status.sh (after the launch) finds the endpoint where it is."""

from __future__ import annotations

import pytest

from simcluster import SimCluster
from tests.cluster.deployment import Deploy
from tests.cluster.test_launch_on_cluster import ask

pytestmark = pytest.mark.cluster

NEW_PORT = 30500


@pytest.mark.parametrize(
    ("changes", "carried_by"),
    [
        ({}, "PORT"),  # adapt, Ray: the variable the image's entrypoint reads, in the head's container
        ({"container.entrypoint": "bypass", "engine.backend": "native"}, "--port"),  # the engine's flag
    ],
    ids=["adapt-ray", "bypass-native"],
)
def test_port_override_serves_on_the_new_port(
    deploy: Deploy, sim_cluster: SimCluster, changes: dict[str, str], carried_by: str
) -> None:
    d = deploy("seed-qwen35-122b-2spark-ray.yaml", "port", changes)
    compiled = d.manifest["plan"]["api_port"]
    assert compiled == 30000 and compiled != NEW_PORT
    launch = d.run("launch-cluster.sh", "--port", str(NEW_PORT))
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert f":{NEW_PORT}/v1" in launch.stdout
    assert ask(sim_cluster, NEW_PORT, d.manifest["plan"]["served_model_name"])["choices"]
    closed = sim_cluster.exec(sim_cluster.head.name, ["curl", "-sf", f"http://127.0.0.1:{compiled}/health"])
    assert closed.returncode != 0  # nothing serves on the compiled port
    seen = d.standin_env(d.nodes[0])
    if carried_by == "PORT":
        assert seen["env"].get("PORT") == str(NEW_PORT)
    else:
        assert seen["argv"][seen["argv"].index("--port") + 1] == str(NEW_PORT)
    assert f"override.port={NEW_PORT}\n" in (d.build / "last-launch.txt").read_text()

    status = d.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f":{NEW_PORT}: healthy" in status.stdout
    assert d.run("stop-cluster.sh").returncode == 0
