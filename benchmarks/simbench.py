"""Shared set-up of the launcher benchmarks: a 4-node simulated cluster (root; simcluster), a
tiny model folder, and the native vLLM example compiled for N of its nodes. Run the benchmarks under
the simulated-cluster lock: flock /tmp/sparkc-simcluster.lock python benchmarks/launch_overhead.py"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deployment, sim_spec

RESULTS = Path(__file__).resolve().parent / "results"


def model_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="sparkc-bench-model-"))
    config = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": 12, "num_key_value_heads": 12}
    (path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 16384}))
    path.chmod(0o755)
    return path


def deployment(
    cluster: SimCluster, model: Path, nodes: int, name: str, env: dict[str, str] | None = None
) -> Deployment:
    changes: dict[str, Any] = {"container.image": VLLM_IMAGE, "model.architecture": {"attention_heads": 12}}
    if env:
        changes["container.env"] = env
    spec = sim_spec(cluster, "llama33-70b-2spark-native.yaml", name, nodes, model, changes)
    return Deployment(cluster, spec, Path(tempfile.mkdtemp(prefix="sparkc-bench-")) / "build")


def machine() -> dict[str, Any]:
    return {"machine": platform.machine(), "cpus": os.cpu_count(), "kernel": platform.release()}


def write(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**data, "host": machine()}, indent=2) + "\n")
    return path
