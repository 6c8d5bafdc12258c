"""The TensorRT-LLM stand-in on the host (no cluster): trtllm-serve's click options and checks, and
trtllm-llmapi-launch under real Open MPI's mpirun, one rank short and whole."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from simcluster.runtime import venv_python
from tests.specs import ROOT

pytestmark = pytest.mark.cluster

PYTHON = str(venv_python())  # the simulated cluster's venv: click and torch (the ranks' rendezvous)
ENV = {**os.environ, "NVIDIA_VISIBLE_DEVICES": "all", "PYTHONPATH": str(ROOT)}
MPI_ENV = {**ENV, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "MASTER_ADDR": "127.0.0.1"}
STANDIN = (PYTHON, "-m", "simcluster.standin")


@pytest.fixture(autouse=True)
def _needs_the_venv() -> None:
    if not Path(PYTHON).exists():
        pytest.skip(f"{PYTHON} is missing: run simcluster/install.sh")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "Qwen3-Tiny"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256})
    )
    return folder


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STANDIN, "trtllm-serve", *args], cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=60
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unknown_option_is_clicks_error_and_exit_2(model: Path) -> None:
    res = serve(str(model), "--tp-size", "2")
    assert res.returncode == 2
    assert "Error: No such option '--tp-size'" in res.stderr and "'--tp_size'" in res.stderr  # click suggests it
    res = serve(str(model), "--backend", "onnx")
    assert res.returncode == 2 and "Invalid value for '--backend'" in res.stderr


def test_no_gpu_and_a_missing_options_file_fail_as_trtllm_serve_does(model: Path, tmp_path: Path) -> None:
    res = serve(str(model), env={**ENV, "NVIDIA_VISIBLE_DEVICES": ""})
    assert res.returncode == 1 and "No GPU devices found on the node" in res.stderr
    res = serve(str(model), "--extra_llm_api_options", str(tmp_path / "nothing.yaml"))
    assert res.returncode == 1 and "FileNotFoundError" in res.stderr


def test_tensor_parallel_without_mpi_ranks_is_refused(model: Path) -> None:
    res = serve(str(model), "--tp_size", "2")
    assert res.returncode == 1
    assert (
        "Cannot instantiate Generator for engine built for 2 ranks, while currently running on 1 ranks." in res.stderr
    )


def mpirun(ranks: int, port: int, model: Path, master_port: int) -> subprocess.Popen[str]:
    argv = ["mpirun", "-np", str(ranks), "--oversubscribe", "-x", "NVIDIA_VISIBLE_DEVICES", "-x", "MASTER_ADDR"]
    argv += ["-x", f"MASTER_PORT={master_port}", "-x", "PYTHONPATH", *STANDIN, "trtllm-llmapi-launch"]
    argv += [*STANDIN, "trtllm-serve", str(model), "--tp_size", "2", "--port", str(port), "--host", "127.0.0.1"]
    return subprocess.Popen(argv, cwd=ROOT, env=MPI_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is missing (apt-get install openmpi-bin)")
def test_under_mpirun_a_rank_short_fails_and_the_whole_world_serves(model: Path) -> None:
    short = mpirun(1, free_port(), model, free_port())
    out, _ = short.communicate(timeout=60)
    assert short.returncode != 0, out
    assert "Cannot instantiate Generator for engine built for 2 ranks, while currently running on 1 ranks." in out

    port = free_port()
    whole = mpirun(2, port, model, free_port())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
                    models = json.load(answer)
                break
            except OSError:
                assert whole.poll() is None and time.monotonic() < deadline, whole.stdout.read() if whole.stdout else ""
                time.sleep(0.3)
        assert [m["id"] for m in models["data"]] == ["Qwen3-Tiny"]  # the folder's name, as trtllm-serve names it
    finally:
        whole.terminate()
        out, _ = whole.communicate(timeout=30)
    assert "rank1 run mgmn worker node with mpi_world_size: 2" in out
    assert "start MpiSession with 2 workers" in out
