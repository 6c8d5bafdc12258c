"""The stand-in engine, the hellohal entrypoint and the image archive, on the host (no cluster, no root)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from simcluster import images, shims
from tests.specs import ROOT

pytestmark = pytest.mark.cluster

# Started on this machine, not in a node: the stand-in reads a machine's memory with room for vLLM's default
# 0.9 (these tests are not about memory; tests/cluster/test_memory_on_cluster.py is), not this host's.
ROOMY_MEMINFO = Path(__file__).parent / "data" / "meminfo-roomy"
ENV = {
    **os.environ,
    "SPARKC_STANDIN_REQUIRE_GPU": "0",
    "PYTHONPATH": str(ROOT),
    "SPARKC_STANDIN_MEMINFO": str(ROOMY_MEMINFO),
}


def standin(*args: str, timeout: float = 30, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simcluster.standin", *args],
        cwd=ROOT,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(
        json.dumps({"num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 256})
    )
    return tmp_path


def test_env_line_comes_first_even_on_a_bad_flag(model: Path) -> None:
    res = standin("vllm", "serve", str(model), "--no-such-flag", env={**ENV, "MARK": "x"})
    assert res.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --no-such-flag" in res.stderr
    first = res.stdout.splitlines()[0]
    assert first.startswith("SPARKC_STANDIN_ENV ")
    payload = json.loads(first.split(" ", 1)[1])
    assert payload["env"]["MARK"] == "x"
    assert payload["argv"] == ["vllm", "serve", str(model), "--no-such-flag"]


def test_sglang_vocabulary_is_not_vllm_vocabulary(model: Path) -> None:
    res = standin("sglang", "--model-path", str(model), "--gpu-memory-utilization", "0.5")
    assert res.returncode == 2
    assert "unrecognized arguments: --gpu-memory-utilization 0.5" in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--tensor-parallel-size", "3"],
            "Total number of attention heads (8) must be divisible by tensor parallel size (3)",
        ),
        (
            ["--max-model-len", "1024"],
            "User-specified max_model_len (1024) is greater than the derived max_model_len",
        ),
    ],
)
def test_model_config_checks(model: Path, args: list[str], message: str) -> None:
    res = standin("vllm", "serve", str(model), *args)
    assert res.returncode == 1
    assert message in res.stdout


def test_layout_needs_enough_gpus(model: Path) -> None:
    res = standin("vllm", "serve", str(model), "--tensor-parallel-size", "2")
    assert res.returncode == 1
    assert "needs 2 GPUs" in res.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(model: Path) -> Iterator[str]:
    args = ["vllm", "serve", str(model), "--served-model-name", "tiny", "alias", "--max_model_len", "128"]
    yield from _serve(args, {})


def _serve(args: list[str], env: dict[str, str]) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "simcluster.standin", *args, "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env={**ENV, "SPARKC_STANDIN_LOAD_SECONDS": "0.5", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(proc.communicate()[0].decode()) from None
            time.sleep(0.1)
    yield url
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def _post(url: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    ("engine", "env"),
    [("vllm", {"VLLM_API_KEY": "sk-1"}), ("vllm", {}), ("sglang", {})],
    ids=["vllm-env", "vllm-flag", "sglang-flag"],
)
def test_an_api_key_guards_v1_but_not_health(model: Path, engine: str, env: dict[str, str]) -> None:
    if engine == "vllm":
        args = ["vllm", "serve", str(model)] + ([] if env else ["--api-key", "sk-1"])
    else:
        args = ["sglang", "--model-path", str(model), "--api-key", "sk-1"]
    served = _serve(args, env)
    url = next(served)
    try:
        assert urllib.request.urlopen(f"{url}/health", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(f"{url}/v1/models", timeout=5)
        assert denied.value.code == 401
        keyed = urllib.request.Request(f"{url}/v1/models", headers={"Authorization": "Bearer sk-1"})
        assert urllib.request.urlopen(keyed, timeout=5).status == 200
    finally:
        next(served, None)


def test_openai_api(server: str) -> None:
    with urllib.request.urlopen(f"{server}/v1/models", timeout=5) as resp:
        models = json.loads(resp.read())
    assert [m["id"] for m in models["data"]] == ["tiny", "alias"]
    assert models["data"][0]["max_model_len"] == 128

    status, body = _post(f"{server}/v1/completions", {"model": "tiny", "prompt": "one two", "max_tokens": 4})
    assert status == 200
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}
    status, body = _post(
        f"{server}/v1/chat/completions",
        {"model": "alias", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
    )
    assert status == 200 and body["object"] == "chat.completion"
    status, body = _post(f"{server}/v1/completions", {"model": "other", "prompt": "x"})
    assert status == 404 and body["message"] == "The model `other` does not exist."
    status, body = _post(f"{server}/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 500})
    assert status == 400 and "maximum context length is 128 tokens" in str(body["message"])


def test_hellohal_entrypoint_rewrites_the_command(tmp_path: Path) -> None:
    entry = tmp_path / "entrypoint.sh"
    entry.write_text(shims.HELLOHAL_ENTRYPOINT)
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf \'%s\\n\' "$a"; done\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "PORT": "9000"}
    words = [
        "vllm",
        "serve",
        "/m",
        "--port",
        "30000",
        "--max-model-len=4096",
        "--served-model-name",
        "q",
        "--host",
        "1.2.3.4",
        "--gpu-memory-utilization",
        "0.5",
        "--trust-remote-code",
    ]
    res = subprocess.run(["bash", str(entry), *words], env=env, capture_output=True, text=True, check=True)
    argv = res.stdout.split("=" * 42 + "\n")[-1].splitlines()
    assert argv == [
        "serve",
        "/models/model",
        "--host",
        "0.0.0.0",
        "--port",
        "9000",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.85",
        "--served-model-name",
        "q",
        "--trust-remote-code",
    ]


def test_archives_are_deterministic_and_swaps_change_the_id() -> None:
    base = images._tar_files({"etc/os-release": (0o644, "ID=debian\n")})
    files = shims.variant_files("vllm", "/opt/venv", "/opt/python")
    image = images._image("x/y:test", (base, images._tar_files(files)), None, "vllm", ["base", "shims"])
    again = images._image("x/y:test", (base, images._tar_files(files)), None, "vllm", ["base", "shims"])
    assert image.id == again.id
    swapped = images.swapped_image(image, "rebuilt")
    assert swapped.id != image.id and swapped.tag == image.tag

    one, two = io.BytesIO(), io.BytesIO()
    images.write_archive(one, [image, swapped])
    images.write_archive(two, [image, swapped])
    assert one.getvalue() == two.getvalue()
    with tarfile.open(fileobj=io.BytesIO(one.getvalue())) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        layer_files = [m for m in tar.getnames() if m.endswith("layer.tar")]
    assert [m["RepoTags"] for m in manifest] == [["x/y:test"], ["x/y:test"]]
    assert len(layer_files) == 3  # the shared base and shim layers are stored once


def test_noray_image_has_no_ray_shim() -> None:
    assert "usr/local/bin/ray" in shims.variant_files("vllm", "/v", "/p")
    assert "usr/local/bin/ray" not in shims.variant_files("vllm-noray", "/v", "/p")
    assert "app/entrypoint.sh" in shims.variant_files("hellohal", "/v", "/p")


@pytest.mark.parametrize(
    ("name", "spec", "matches"),
    [
        ("enp1s0f0np0", "enp1s0f0np0", True),
        ("enp1s0f0np0", "enp1s0", True),  # a prefix, as NCCL matches by default
        ("enp1s0f0np0", "=enp1s0", False),  # '=': the exact name only
        ("enp1s0f0np0", "mgmt0,enp1s0f0np0", True),
        ("docker0", "^docker,lo", False),  # '^': anything but these
        ("mgmt0", "^docker,lo", True),
    ],
)
def test_nccl_bootstrap_picks_interfaces_as_nccl_does(name: str, spec: str, matches: bool) -> None:
    from simcluster.standin.nccl_bootstrap import _matches

    assert _matches(name, spec) is matches


def test_nccl_bootstrap_listens_on_one_interface_of_the_list() -> None:
    from simcluster.standin.nccl_bootstrap import find_interface

    assert find_interface("lo") == ("lo", "127.0.0.1")  # loopback only when named
    assert find_interface("no-such-netdev") is None


# -- vLLM's multi-node data parallel (standin/data_parallel.py), on the host's loopback -----------------


def _spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "simcluster.standin", *args],
        cwd=ROOT,
        env={**ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(f"{url}/health", timeout=1).status == 200
    except OSError:
        return False


def _dp_args(model: Path, rpc: int, *extra: str) -> list[str]:
    return ["vllm", "serve", str(model), "--data-parallel-size", "2", "--data-parallel-size-local", "1",
            "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc), *extra]  # fmt: skip


def test_the_front_end_serves_only_once_every_data_parallel_rank_has_connected(model: Path) -> None:
    port, rpc = _free_port(), _free_port()
    head = _spawn([*_dp_args(model, rpc), "--host", "127.0.0.1", "--port", str(port)], {"VLLM_LOGGING_LEVEL": "DEBUG"})
    worker = None
    try:
        # A missing rank: vLLM's front end waits for it without a timeout of its own, and serves nothing.
        time.sleep(6)
        assert head.poll() is None and not _answers(f"http://127.0.0.1:{port}")
        worker = _spawn([*_dp_args(model, rpc), "--headless", "--data-parallel-start-rank", "1"])
        deadline = time.monotonic() + 20
        while not _answers(f"http://127.0.0.1:{port}"):
            assert time.monotonic() < deadline and head.poll() is None and worker.poll() is None
            time.sleep(0.2)
    finally:
        for proc in (head, worker):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        out = head.communicate(timeout=10)[0]
        worker_out = worker.communicate(timeout=10)[0] if worker else ""
    assert "Waiting for 0 local, 1 remote core engine proc(s) to connect." in out
    assert '"ranks": [1], "role": "front end"' in out
    assert "with head node address tcp://127.0.0.1:" in worker_out and '"role": "headless"' in worker_out


def test_a_headless_node_gives_up_without_a_front_end(model: Path) -> None:
    args = [*_dp_args(model, _free_port()), "--headless", "--data-parallel-start-rank", "1"]
    res = standin(*args, env={**ENV, "SPARKC_STANDIN_DP_HANDSHAKE_S": "2"})
    assert res.returncode == 1
    assert "Did not receive response from front-end process within 5 minutes" in res.stdout


def test_the_front_end_refuses_an_engine_of_a_rank_it_runs_itself(model: Path) -> None:
    rpc = _free_port()
    head = _spawn([*_dp_args(model, rpc), "--port", str(_free_port())])
    try:
        worker = _spawn([*_dp_args(model, rpc), "--headless", "--data-parallel-start-rank", "0"])
        assert head.wait(timeout=20) == 1
    finally:
        worker.kill()
        worker.wait()
    assert "Message from engine with unexpected data parallel rank: 0" in (head.stdout.read() if head.stdout else "")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--data-parallel-rank", "1"], "Non-MoE models do not support external data parallel mode"),
        (["--headless", "--api-server-count", "1"], "cannot be used with --headless"),
        (["--data-parallel-start-rank", "2"], "data_parallel_rank (2) must be in the range [0, 2)"),
    ],
)
def test_vllm_data_parallel_refusals(model: Path, extra: list[str], message: str) -> None:
    res = standin(*_dp_args(model, _free_port()), *extra)
    assert res.returncode == 1
    assert message in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp-size", "2", "--attn-dp-size", "3"], "tp_size (2) must be divisible by attn_dp_size (3)"),
        (["--tp-size", "2", "--attn-dp-size", "2", "--dp-size", "2"], "are not supported"),
        (["--tp-size", "2", "--ep-size", "3"], "tp_size == moe_ep_size * moe_dp_size * moe_tp_size"),
    ],
)
def test_sglang_parallel_widths(model: Path, args: list[str], message: str) -> None:
    res = standin("sglang", "--model-path", str(model), *args)
    assert res.returncode == 1
    assert message in res.stdout


def test_sglang_needs_experts_that_divide_by_the_expert_parallel_size(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 8, "num_experts": 3}))
    res = standin("sglang", "--model-path", str(tmp_path), "--tp-size", "2", "--ep-size", "2")
    assert res.returncode == 1
    assert "num_physical_experts (3) % ep_size (2) != 0" in res.stdout


@pytest.mark.parametrize(
    ("release", "reads"),
    [
        ("2.27.7", []),  # NGC 26.05's kind: the variables are ignored, without a word
        ("2.30.4", []),
        ("2.30.7", ["NCCL_IB_SUBNET_AWARE_ROUTING", "NCCL_IB_SUBNET_PREFIX_LEN"]),
        ("2.30.10", ["NCCL_IB_SUBNET_AWARE_ROUTING", "NCCL_IB_SUBNET_PREFIX_LEN"]),  # 10 > 7 as numbers
        ("", []),
    ],
)
def test_the_standins_nccl_reads_subnet_routing_from_2_30_7_on(release: str, reads: list[str]) -> None:
    from simcluster.standin.nccl_bootstrap import nccl_reads

    env = {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_SUBNET_PREFIX_LEN": "30", "NCCL_DEBUG": "INFO"}
    assert sorted(nccl_reads(release, env)) == reads


def test_each_image_carries_its_nccl_release_and_only_the_trtllm_one_lacks_sshd() -> None:
    for variant, release in images.NCCL_RELEASES.items():
        assert variant in shims.VARIANTS and release.count(".") == 2
    assert images.NCCL_RELEASES["vllm"] == "2.30.7"  # the mesh and ring tests run on it
    assert images.TRTLLM_SSHD_IMAGE in images.IMAGES
