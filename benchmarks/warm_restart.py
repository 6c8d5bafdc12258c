"""Real vLLM (CPU build) on one simulated node, started twice through launch-cluster.sh with
container.cache on: the second start finds what the first left in the host's cache folder.
Writes benchmarks/results/warm-restart-sim.json.

    flock /tmp/sparkc-simcluster.lock python benchmarks/warm_restart.py

Needs simcluster/install_vllm.sh to have run. On CPU the sim runs vLLM with TorchDynamo off
(the images have no C++ compiler for inductor), so little is compiled: the figures show what the
cache saves here, not on a GPU (see benchmarks/compile_warm.py for that).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcluster import NodeSpec, SimCluster
from simcluster.images import VLLM_IMAGE
from simcluster.tinymodel import make_tiny_model
from simcluster.vllm_cpu import TINY_MODEL_DIR, VLLM_VENV, vllm_available, vllm_env, vllm_mounts
from tests.cluster.deployment import Deployment, sim_spec
from tests.specs import DELETE

RESULTS = Path(__file__).resolve().parent / "results" / "warm-restart-sim.json"


def start(d: Deployment) -> float:
    began = time.monotonic()
    launch = d.run("launch-cluster.sh", timeout=600)
    if launch.returncode != 0:
        raise SystemExit(launch.stdout + launch.stderr)
    return round(time.monotonic() - began, 1)


def main() -> int:
    if not vllm_available():
        raise SystemExit("vLLM on CPU is not installed: bash simcluster/install_vllm.sh")
    model = make_tiny_model(TINY_MODEL_DIR)
    cluster = SimCluster([NodeSpec("spark1")], name="sparkc-bench")
    cluster.up()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            path = f"{VLLM_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            spec = sim_spec(
                cluster,
                "solo-qwen3-32b.yaml",
                "warm",
                1,
                model,
                {
                    "container.image": VLLM_IMAGE,
                    "container.gpus": "none",
                    "container.mounts": [{"host": h, "container": c, "readonly": True} for h, c in vllm_mounts()],
                    "container.env": {"PATH": path, **vllm_env()},
                    "container.cache": {"host": str(cache)},
                    "engine.reasoning_parser": DELETE,
                    "engine.max_model_len": 256,
                    "engine.gpu_memory_utilization": 0.5,
                    "model.name": "tiny",
                    "launch.timeout": 420,
                },
            )
            d = Deployment(cluster, spec, Path(tmp) / "build")
            try:
                cold = start(d)
                d.run("stop-cluster.sh")
                size = subprocess.run(["du", "-sh", str(cache)], capture_output=True, text=True).stdout.split()[0]
                listing = sorted(str(p.relative_to(cache)) for p in cache.iterdir())
                warm = start(d)
                d.run("stop-cluster.sh")
            finally:
                d.remove()
            # Control: a third start with the cache off, the OS's page cache as warm as for the second.
            off = dict(spec, container={**spec["container"], "cache": {"enabled": False}})
            control = Deployment(cluster, off, Path(tmp) / "build-off")
            try:
                no_cache = start(control)
                control.run("stop-cluster.sh")
            finally:
                control.remove()
    finally:
        cluster.teardown()
    result = {
        "what": "launch-cluster.sh to READY (/health, /v1/models, one completion), vLLM CPU build, tiny Llama, "
        "one simulated node; stop-cluster.sh between; container.cache kept on the host",
        "cold_start_s": cold,
        "warm_start_s": warm,
        "third_start_cache_off_s": no_cache,
        "cache_after_first_start": {"size": size, "folders": listing},
        "note": "TorchDynamo is off for vLLM on CPU here, so there is little compiled work to keep; "
        "the control (third start, cache off) shows how much of the difference is the OS's page cache",
    }
    RESULTS.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
