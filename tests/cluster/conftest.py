"""``deploy``: compiles an example adapted to the simulated cluster (tests/cluster/deployment.py) and
removes its containers after the test. The cluster fixtures themselves come from tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from simcluster import SimCluster
from simcluster.images import HELLOHAL_IMAGE
from tests.cluster.deployment import Deploy, Deployment, sim_spec

HELLOHAL_REAL = "hellohal2064/vllm-qwen3.5-gb10:latest"  # the seed's image name; the sim image is tagged so


@pytest.fixture
def deploy(sim_cluster: SimCluster, sim_model_dir: Path, tmp_path: Path) -> Iterator[Deploy]:
    made: list[Deployment] = []
    for node in sim_cluster.nodes:  # the seed's image name, as an operator would have pulled it
        sim_cluster.docker(node.name, "tag", HELLOHAL_IMAGE, HELLOHAL_REAL, check=True)

    def make(example: str, name: str, changes: Mapping[str, Any] | None = None, nodes: int = 2) -> Deployment:
        spec = sim_spec(sim_cluster, example, name, nodes, sim_model_dir, changes)
        deployment = Deployment(sim_cluster, spec, tmp_path / f"build-{name}-{len(made)}")
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.remove()
