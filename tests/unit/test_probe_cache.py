"""The fabric probe's plan and program, and the compile caches' mounts and environment."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from compiler.plan import flat
from compiler.resources import data_dir
from tests.specs import node_env, with_changes
from tests.unit.test_resolve import BASE, plan_of


def probe_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe", data_dir("runtime") / "probe.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probe_on_for_several_nodes_with_each_nodes_env_and_torchrun_variables() -> None:
    plan = plan_of(BASE)
    assert plan.probe and plan.probe_port == 29501
    words = flat(plan.nodes[1].probe_run)
    assert words[:5] == ("docker", "run", "-d", "--name", "sparkc-demo-b-probe")
    assert words[-3:] == ("--entrypoint", "python3", "vllm/vllm-openai:v0.11.2")
    for pair in ("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29501"):
        assert pair in words
    assert "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in words and "--device" not in words  # privileged
    names = [words[i + 1].split("=")[0] for i, w in enumerate(words) if w == "-e"]
    assert len(names) == len(set(names))  # the probe's RANK, MASTER_PORT ... replace the engine's, never twice
    off = plan_of(with_changes(BASE, {"launch.probe": False}))
    assert not off.probe and all(n.probe_run == () for n in off.nodes)
    solo = with_changes(BASE, {"cluster.nodes": BASE["cluster"]["nodes"][:1], "engine.tensor_parallel": 1})
    assert not plan_of(solo).probe


def test_probe_reads_the_transport_nccl_reports() -> None:
    probe = probe_program()
    socket = (
        "vm:890:890 [0] NCCL INFO Using network Socket\n"
        "vm:890:890 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n"
    )
    assert probe.nccl_transport(socket) == ("Socket", ["NET/Socket"])
    ib = "x [0] NCCL INFO Using network IB\nx [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n"
    assert probe.nccl_transport(ib)[0] == "IB"
    one_host = "x [0] NCCL INFO Using network Socket\nx [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
    assert probe.nccl_transport(one_host) == ("P2P", ["P2P"])  # the loaded plugin is not what carries data
    assert probe.nccl_transport("nothing") == ("unknown", [])


def test_cache_per_image_mounted_with_every_librarys_variable() -> None:
    plan = plan_of(BASE)
    assert plan.cache_host == "/var/cache/sparkc/vllm_vllm-openai_v0.11.2"
    words = flat(plan.nodes[0].docker_run)
    assert "/var/cache/sparkc/vllm_vllm-openai_v0.11.2:/var/cache/sparkc" in words
    env = node_env(plan, "a")
    assert env["TRITON_CACHE_DIR"] == "/var/cache/sparkc/triton"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/var/cache/sparkc/inductor"
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/sparkc/vllm"
    assert env["FLASHINFER_WORKSPACE_BASE"] == "/var/cache/sparkc/flashinfer"
    assert (
        env["CUTE_DSL_CACHE_DIR"] == "/var/cache/sparkc/cute-dsl" and env["HF_HOME"] == "/var/cache/sparkc/huggingface"
    )
    own = plan_of(with_changes(BASE, {"container.cache": {"host": "/data/jit"}, "container.env": {"HF_HOME": "/hf"}}))
    assert "/data/jit:/var/cache/sparkc" in flat(own.nodes[1].docker_run)
    assert node_env(own, "b")["HF_HOME"] == "/hf"  # the spec's own value wins
    off = plan_of(with_changes(BASE, {"container.cache": {"enabled": False}}))
    assert off.cache_host == "" and "TRITON_CACHE_DIR" not in node_env(off, "a")
    assert not any(w.endswith(":/var/cache/sparkc") for w in flat(off.nodes[0].docker_run))
