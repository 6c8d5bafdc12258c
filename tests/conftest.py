from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.product import COMPILER_DIR, INSTALLED
from tests.specs import ROOT


def pytest_report_header() -> str:
    return f"sparkc under test: {COMPILER_DIR} ({'installed' if INSTALLED else 'the source checkout'})"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under CI the suite proves what users install: a `compiler` imported from the checkout fails the run."""
    if os.environ.get("CI") and not INSTALLED:
        pytest.exit(
            f"CI must test the installed sparkc, but `compiler` was imported from the checkout ({COMPILER_DIR}): "
            "install the wheel (pip install '.[test]', not -e) and run pytest with --import-mode=append",
            returncode=4,
        )


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
