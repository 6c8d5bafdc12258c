"""The fabric probe and the compile caches on the simulated cluster: gloo across real namespaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy
from tests.specs import DELETE

pytestmark = pytest.mark.cluster


def test_probe_meets_every_node_before_the_engine_and_stop_keeps_the_cache(
    deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    cache = tmp_path / "compile-cache"
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "probe",
        {"container.image": VLLM_IMAGE, "model.architecture": DELETE, "container.cache": {"host": str(cache)}},
        nodes=3,
    )
    launch = d.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    out = launch.stdout
    assert out.index("== probe:") < out.index("== containers:")  # before any engine starts
    for node in d.nodes:  # gloo's TCP on the sim: a real all-reduce between the namespaces
        assert f"{node}: probe transport TCP, bus bandwidth " in out, out
        assert d.containers_on(node) == [d.container(node)]  # the probe's containers are gone
    env = d.standin_env("spark2")["env"]
    assert env["TRITON_CACHE_DIR"] == "/var/cache/sparkc/triton"
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/sparkc/vllm"
    written = sim_cluster.docker(
        "spark2",
        "exec",
        d.container("spark2"),
        "sh",
        "-c",
        'mkdir -p "$TRITON_CACHE_DIR" && echo k > "$TRITON_CACHE_DIR/k"',
    )
    assert written.returncode == 0, written.stderr
    assert d.run("stop-cluster.sh").returncode == 0
    assert (cache / "triton" / "k").read_text() == "k\n"  # stop removed the containers, not the cache


def test_probe_ends_by_itself_when_a_node_is_cut_off(deploy: Deploy, sim_cluster: SimCluster) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml", "probe-cut", {"container.image": VLLM_IMAGE, "model.architecture": DELETE}
    )
    sim_cluster.break_fabric("spark2")
    try:
        # Preflight would find the link down first (as it should); skipped, the probe meets the cut itself.
        launch = d.run("launch-cluster.sh", "--skip-preflight", timeout=200)
    finally:
        sim_cluster.restore_fabric("spark2")
    assert launch.returncode == 1, launch.stdout + launch.stderr
    assert "FAILED in phase probe" in launch.stderr and "no result within 60 s" in launch.stderr, launch.stderr
    assert launch.elapsed < 150  # its own timeout, not the launch's
    assert all(d.containers_on(n) == [] for n in d.nodes)  # no engine was started, no probe left
