from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster

# The simulated cluster's fixtures, registered here once for tests/cluster and tests/simcluster/tests:
# a session fixture defined in two conftests would make two clusters.
from tests.simcluster.fixtures import run_container, sim_cluster, sim_model_dir  # noqa: F401
from tests.specs import ROOT


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """sparkc's cache (clean scripts, compiled templates) in a folder of this test session, not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("sparkc-cache")))
        yield


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeCluster]:
    """Fake ssh and docker on PATH, recording every call; see tests/fakes/."""
    cluster = FakeCluster(tmp_path)
    yield cluster
    cluster.shutdown()
