"""An `adapt` image re-pulled under the same tag with an entrypoint that reads other variables: a profile that
recorded the entrypoint's sha256 stops the launch at preflight; without one, the engine comes up on a port of its
own choosing, and the launch says so within seconds instead of waiting out launch.timeout."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from compiler.resources import data_dir
from simcluster import SimCluster
from simcluster.images import HELLOHAL_IMAGE
from simcluster.shims import HELLOHAL_ENTRYPOINT
from tests.cluster.conftest import HELLOHAL_REAL
from tests.cluster.deployment import Deploy, Deployment
from tests.cluster.test_launch_on_cluster import assert_failed
from tests.specs import DELETE

pytestmark = pytest.mark.cluster

SEED = "seed-qwen35-122b-2spark-ray.yaml"
# The same script, but the new release reads SERVER_PORT: sparkc's PORT=30000 no longer moves it off 8000.
CHANGED = HELLOHAL_ENTRYPOINT.replace('PORT="${PORT:-8000}"', 'PORT="${SERVER_PORT:-8000}"')


@pytest.fixture
def changed_image(sim_cluster: SimCluster) -> Iterator[None]:
    """The head's hellohal image swapped for the changed release under the seed's tag; put back after."""
    assert CHANGED != HELLOHAL_ENTRYPOINT
    sim_cluster.break_swap_image("spark1", HELLOHAL_IMAGE, "entrypoint-2", {"app/entrypoint.sh": (0o755, CHANGED)})
    sim_cluster.docker("spark1", "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)
    yield
    sim_cluster.load_image("spark1", HELLOHAL_IMAGE)
    sim_cluster.docker("spark1", "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)


def solo(deploy: Deploy, name: str) -> Deployment:
    return deploy(SEED, name, {"container.entrypoint": "adapt", "engine.backend": DELETE}, nodes=1)


def test_a_changed_entrypoint_stops_at_preflight_when_the_profile_recorded_its_sha256(
    deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    recorded = hashlib.sha256(HELLOHAL_ENTRYPOINT.encode()).hexdigest()
    builtin = (data_dir("profiles") / "hellohal-vllm-qwen35-gb10.yaml").read_text(encoding="utf-8")
    (tmp_path / "profiles").mkdir()  # beside the spec file the deployment writes into tmp_path
    (tmp_path / "profiles" / "hellohal.yaml").write_text(builtin + f"entrypoint_sha256: {recorded}\n")
    d = solo(deploy, "ep-sum")
    assert d.manifest["plan"]["profile_check"]["entrypoint_sha256"] == recorded
    launch = d.run("launch-cluster.sh", timeout=240)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "image matches profile" in launch.stdout
    assert d.run("stop-cluster.sh").returncode == 0
    sim_cluster.break_swap_image("spark1", HELLOHAL_IMAGE, "entrypoint-2", {"app/entrypoint.sh": (0o755, CHANGED)})
    sim_cluster.docker("spark1", "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)
    try:
        again = d.run("launch-cluster.sh", timeout=120)
    finally:
        sim_cluster.load_image("spark1", HELLOHAL_IMAGE)
        sim_cluster.docker("spark1", "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)
    assert_failed(again, "spark1", "preflight", budget=60)
    shown = " ".join(again.stderr.split())
    changed = hashlib.sha256(CHANGED.encode()).hexdigest()
    assert f"the entrypoint /app/entrypoint.sh of image {HELLOHAL_REAL} changed since profile" in shown, shown
    assert f"(sha256 {changed}; the profile recorded {recorded})" in shown
    assert f"draft the profile again (sparkc profile {HELLOHAL_REAL})" in shown
    assert not sim_cluster.docker("spark1", "ps", "-q").stdout.strip()


@pytest.mark.usefixtures("changed_image")
def test_an_engine_on_another_port_is_reported_within_seconds(deploy: Deploy) -> None:
    d = solo(deploy, "ep-port")  # the built-in profile, which records no sha256
    assert d.manifest["plan"]["api_port"] == 30000
    launch = d.run("launch-cluster.sh", timeout=300)
    assert_failed(launch, "spark1", "readiness", budget=150)  # launch.timeout is 240 s
    shown = " ".join(launch.stderr.split())
    assert "the engine answers on port 8000, not on port 30000 where this launch waits for it" in shown, shown
    assert f"re-profile the image (sparkc profile {HELLOHAL_REAL})" in shown
