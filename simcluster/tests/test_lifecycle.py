"""A cluster can be started again after teardown, and after a run that was killed mid-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simcluster import SimCluster, cleanup_stale, preflight
from simcluster.fixtures import unavailable
from simcluster.net import list_netns
from simcluster.nodes import WORK_ROOT
from tests.specs import ROOT

pytestmark = pytest.mark.cluster

NAME = "sparkc-lc"  # its own name: the session cluster keeps running beside it


def _leftovers() -> list[str]:
    found = [ns for ns in list_netns() if ns.startswith(f"{NAME}_")]
    if (WORK_ROOT / NAME).exists():
        found.append(str(WORK_ROOT / NAME))
    return found


@pytest.fixture
def fresh() -> None:
    problems = preflight()
    if problems:
        unavailable("; ".join(problems))
    cleanup_stale(NAME)


@pytest.mark.usefixtures("fresh")
def test_up_down_up() -> None:
    for _ in range(2):
        cluster = SimCluster(2, name=NAME).up(images=())
        try:
            assert cluster.ssh("spark1", "spark2", "hostname", check=True).stdout.strip() == "spark2"
        finally:
            cluster.teardown()
        assert _leftovers() == []


@pytest.mark.usefixtures("fresh")
def test_killed_run_leaves_nothing_that_breaks_the_next() -> None:
    # A harness that dies by SIGKILL right after `up` leaves nodes, namespaces and files behind.
    code = (
        f"import os, signal; from simcluster import SimCluster; "
        f"SimCluster(2, name={NAME!r}).up(images=()); os.kill(os.getpid(), signal.SIGKILL)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    assert len(_leftovers()) == 4  # two nodes, the bridge namespace, the work dir

    cluster = SimCluster(2, name=NAME).up(images=())
    try:
        assert cluster.exec("spark2", ["hostname"], check=True).stdout.strip() == "spark2"
    finally:
        cluster.teardown()
    assert _leftovers() == []
    assert not any(str(WORK_ROOT / NAME) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())
    os.sync()
