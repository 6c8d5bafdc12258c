"""Resolve on small hand-built specs: per-node settings, entrypoint modes, layout and port rules."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.pipeline import CompileResult
from compiler.plan import Plan
from tests.specs import (
    DELETE,
    compile_spec,
    container_command,
    diagnostics_text,
    docker_run_words,
    example,
    flag_value,
    flag_values,
    node_env,
    node_plan,
    node_settings,
    ray_engine_words,
    with_changes,
)

BASE: dict[str, Any] = {
    "sparkc": 1,
    "name": "demo",
    "cluster": {
        "nodes": [
            {
                "name": "a",
                "ssh": "a.lan",
                "fabric": {"ip": "10.0.0.1", "netdev": "enp1s0f1np1", "hcas": ["rocep1s0f1", "roceP2p1s0f1"]},
            },
            {
                "name": "b",
                "ssh": "b.lan",
                "fabric": {"ip": "10.0.0.2", "netdev": "enp1s0f0np0", "hcas": ["rocep1s0f0", "roceP2p1s0f0"]},
            },
        ]
    },
    "container": {"image": "vllm/vllm-openai:v0.11.2"},
    "model": {"path": "/srv/m"},
    "engine": {"kind": "vllm", "tensor_parallel": 2},
}


def resolved(spec: dict[str, Any]) -> CompileResult:
    return compile_spec(spec, "t.yaml", render_files=False)


def plan_of(spec: dict[str, Any]) -> Plan:
    result = resolved(spec)
    assert result.plan is not None, diagnostics_text(result, "t.yaml")
    return result.plan


def messages(spec: dict[str, Any], severity: Severity = Severity.ERROR) -> list[str]:
    return [d.message for d in resolved(spec).diagnostics if d.severity is severity]


def test_every_fabric_setting_is_per_node() -> None:
    plan = plan_of(BASE)
    assert plan.start_waves == (("a",), ("b",))  # Ray: the head first
    a, b = node_env(plan, "a"), node_env(plan, "b")
    for name in (
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "TP_SOCKET_IFNAME",
        "UCX_NET_DEVICES",
        "OMPI_MCA_btl_tcp_if_include",
    ):
        assert (a[name], b[name]) == ("enp1s0f1np1", "enp1s0f0np0")
    assert (a["VLLM_HOST_IP"], b["VLLM_HOST_IP"]) == ("10.0.0.1", "10.0.0.2")
    assert (a["RAY_NODE_IP_ADDRESS"], b["RAY_OVERRIDE_NODE_IP_ADDRESS"]) == ("10.0.0.1", "10.0.0.2")
    assert a["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1" and b["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
    assert a["MASTER_ADDR"] == b["MASTER_ADDR"] == "10.0.0.1"
    assert a["NCCL_IB_DISABLE"] == "0" and "NCCL_IB_GID_INDEX" not in a
    assert a["RAY_memory_monitor_refresh_ms"] == "0" and a["HF_HUB_OFFLINE"] == "1"
    assert a["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert a["VLLM_ENGINE_READY_TIMEOUT_S"] == str(3600 - 60)
    worker = container_command(plan, "b")
    assert flag_value(worker, "--node-ip-address") == "10.0.0.2" and flag_value(worker, "--address") == "10.0.0.1:6379"


# NCCL over sockets on purpose: no RDMA devices, and the spec says so.
SOCKETS = (("hcas", DELETE), ("transport", "sockets"))


def test_gid_index_only_where_pinned_and_sockets_only_on_purpose() -> None:
    plan = plan_of(with_changes(BASE, {"cluster.nodes.1.env": {"NCCL_IB_GID_INDEX": 3}}))
    assert "NCCL_IB_GID_INDEX" not in node_env(plan, "a") and node_env(plan, "b")["NCCL_IB_GID_INDEX"] == "3"
    sockets = plan_of(with_changes(BASE, {f"cluster.nodes.{i}.fabric.{k}": v for i in (0, 1) for k, v in SOCKETS}))
    assert node_env(sockets, "a")["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in node_env(sockets, "a")
    assert "--device" not in docker_run_words(node_plan(sockets, "a"))


def test_sources_say_where_values_came_from() -> None:
    spec = with_changes(BASE, {"cluster.nodes.0.env": {"NCCL_DEBUG": "INFO"}})
    plan = plan_of(spec)
    settings = node_settings(plan, "a")
    assert settings["NCCL_DEBUG"].source == "spec"
    assert settings["VLLM_HOST_IP"].source == "derived"
    assert settings["HF_HUB_OFFLINE"].source == "default"
    top = {s.name: s for s in plan.settings}
    assert top["backend"].source == "default" and top["backend"].value == "ray"
    assert top["api_port"].value == "8000" and top["api_port"].source == "default"


def test_head_can_be_any_node_and_comes_first() -> None:
    plan = plan_of(with_changes(BASE, {"cluster.head": "b"}))
    assert [n.name for n in plan.nodes] == ["b", "a"] and plan.nodes[0].ssh_target == ""
    assert node_env(plan, "a")["MASTER_ADDR"] == "10.0.0.2"


def test_native_backend_ranks_and_order() -> None:
    plan = plan_of(with_changes(BASE, {"engine.backend": "native"}))
    assert plan.start_waves == (("b",), ("a",))
    head, worker = container_command(plan, "a"), container_command(plan, "b")
    rendezvous = ("--nnodes", "--master-addr", "--master-port")
    assert (
        [flag_value(worker, f) for f in rendezvous]
        == [flag_value(head, f) for f in rendezvous]
        == ["2", "10.0.0.1", "29501"]
    )
    assert (flag_value(head, "--node-rank"), flag_value(worker, "--node-rank")) == ("0", "1")
    assert "--headless" in worker and "--headless" not in head
    # vllm/vllm-openai keeps its `vllm serve` entrypoint: the words are engine arguments only
    assert head[0] == "/srv/m"


def test_single_node_defaults_to_native_without_rendezvous_flags() -> None:
    plan = plan_of(with_changes(BASE, {"engine.tensor_parallel": 1, "cluster.nodes.1": DELETE}))
    assert plan.backend == "native" and plan.start_waves == (("a",),)
    assert "--nnodes" not in container_command(plan, "a")


def test_hellohal_modes() -> None:
    base = with_changes(
        BASE,
        {
            "container.image": "hellohal2064/vllm-qwen3.5-gb10:latest",
            "engine.port": 30000,
            "engine.max_model_len": 4096,
            "model.mount": "/models/q",
        },
    )
    adapt = plan_of(base)
    assert adapt.entrypoint_mode == "adapt"
    assert node_env(adapt, "a")["PORT"] == "30000" and node_env(adapt, "a")["MODEL_PATH"] == "/models/q"
    assert adapt.api_port == 30000
    engine = ray_engine_words(adapt)
    assert engine[0] == "/app/entrypoint.sh"  # the image's entrypoint, given only the words it passes on
    assert flag_value(engine, "--served-model-name") == "m"  # model.path's folder name, not the mount
    assert (flag_value(engine, "--tensor-parallel-size"), flag_value(engine, "--pipeline-parallel-size")) == ("2", "1")
    assert flag_value(engine, "--distributed-executor-backend") == "ray"
    # what the entrypoint controls travels in the env: as words it would be ignored
    assert not {"--port", "--host", "--max-model-len", "--gpu-memory-utilization"} & set(engine)
    assert "/models/q" not in engine  # the path travels in MODEL_PATH only

    keep_spec = with_changes(base, {"container.entrypoint": "keep"})
    keep = plan_of(keep_spec)
    effective = {e.setting: e for e in keep.effective}
    assert keep.api_port == 8000 and effective["port"].differs
    assert effective["max_model_len"].effective == "8192" and effective["model_path"].effective == "/models/model"
    assert keep.served_model_name == "/models/model"
    warnings = messages(keep_spec, Severity.WARNING)
    assert any("8000, not 30000" in w for w in warnings) and any("8192, not 4096" in w for w in warnings)
    assert "PORT" not in node_env(keep, "a")

    keep_with_port = with_changes(keep_spec, {"container.env.PORT": 30000})
    assert plan_of(keep_with_port).api_port == 30000  # keep computes what the image will do with the env it gets

    bypass = plan_of(with_changes(base, {"container.entrypoint": "bypass", "engine.backend": "native"}))
    assert flag_value(docker_run_words(node_plan(bypass, "a")), "--entrypoint") == "vllm"
    assert any("skips: sets the GPU clock limit" in q for q in bypass.quirks)


def test_layout_and_architecture_rules() -> None:
    assert any("3 x 1 = 3" in m for m in messages(with_changes(BASE, {"engine.tensor_parallel": 3})))
    found = messages(
        with_changes(
            BASE, {"engine.tensor_parallel": 3, "model.architecture.attention_heads": 64, "cluster.nodes.1.gpus": 2}
        )
    )
    assert any("does not divide the model's 64 attention heads" in m and "pipeline_parallel: 3" in m for m in found)


def test_ports_must_be_distinct_and_clear_of_ray() -> None:
    assert any("is also the API port" in m for m in messages(with_changes(BASE, {"launch.ray_port": 8000})))
    assert any("Ray dashboard" in m for m in messages(with_changes(BASE, {"engine.port": 8265})))
    native = with_changes(BASE, {"engine.backend": "native", "launch.master_port": 8000})
    assert any("rendezvous port" in m for m in messages(native))


def test_topology_ring_sets_nccl_routing() -> None:
    ring = example("llama33-70b-4spark-ring")
    a = node_env(plan_of(ring), "spark-a")
    assert a["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and a["NCCL_ALGO"] == "Ring" and a["NCCL_NET_PLUGIN"] == "none"
    switched = with_changes(ring, {"cluster.topology": "switch"})
    assert "NCCL_ALGO" not in node_env(plan_of(switched), "spark-a")
    assert "NCCL_ALGO" not in node_env(plan_of(BASE), "a")


def test_single_twin_and_wrong_hca_warn() -> None:
    warnings = messages(with_changes(BASE, {"cluster.nodes.0.fabric.hcas": ["rocep1s0f0"]}), Severity.WARNING)
    assert any("only one RDMA device" in w for w in warnings)
    assert any("belongs to RDMA device rocep1s0f1" in w for w in warnings)


def test_secrets_by_name_only() -> None:
    plan = plan_of(with_changes(BASE, {"container.secrets": ["HF_TOKEN"]}))
    passed = flag_values(docker_run_words(node_plan(plan, "a")), "-e")
    assert "HF_TOKEN" in passed and not any(e.startswith("HF_TOKEN=") for e in passed)
    for name in ("WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY"):
        assert any("looks like a secret" in m for m in messages(with_changes(BASE, {f"engine.env.{name}": "x"})))
    assert not messages(with_changes(BASE, {"engine.env.TOKENIZERS_PARALLELISM": "false"}))


def test_sglang_native_flags() -> None:
    plan = plan_of(
        with_changes(
            BASE,
            {
                "engine.kind": "sglang",
                "container.image": "lmsysorg/sglang:v0.5.4",
                "engine.max_model_len": 8192,
                "engine.gpu_memory_utilization": 0.8,
            },
        )
    )
    argv = container_command(plan, "b")
    assert plan.backend == "native" and plan.api_port == 30000
    assert flag_value(argv, "--dist-init-addr") == "10.0.0.1:29501"
    assert flag_value(argv, "--context-length") == "8192"
    assert flag_value(argv, "--mem-fraction-static") == "0.8"
    assert node_env(plan, "b")["SGLANG_HOST_IP"] == "10.0.0.2" and "VLLM_HOST_IP" not in node_env(plan, "b")


@pytest.mark.parametrize("privileged, expected", [(True, "--privileged"), (False, "IPC_LOCK")])
def test_container_flags(privileged: bool, expected: str) -> None:
    plan = plan_of(
        with_changes(
            BASE,
            {
                "container.privileged": privileged,
                "container.gpus": "none",
                "container.ulimits": {"memlock": None, "nofile": "1024:2048"},
            },
        )
    )
    argv = docker_run_words(node_plan(plan, "a"))
    assert expected in argv and "--gpus" not in argv
    ulimits = flag_values(argv, "--ulimit")
    assert "nofile=1024:2048" in ulimits and "stack=67108864" in ulimits
    assert not any(u.startswith("memlock=") for u in ulimits)  # null: docker's own limit
    assert "/srv/m:/srv/m:ro" in flag_values(argv, "-v")


def test_nccl_check_defaults_and_expectations() -> None:
    on = plan_of(BASE)
    assert on.nccl_check and node_env(on, "b")["NCCL_DEBUG"] == "INFO"
    assert [n.nccl_transport for n in on.nodes] == ["IB", ""]  # Ray: the head's log carries every rank
    native = plan_of(with_changes(BASE, {"engine.backend": "native"}))
    assert [n.nccl_transport for n in native.nodes] == ["IB", "IB"]
    off = plan_of(with_changes(BASE, {"launch.nccl_check": False}))
    assert not off.nccl_check and "NCCL_DEBUG" not in node_env(off, "a")
    no_rdma = with_changes(BASE, {f"cluster.nodes.{i}.fabric.{k}": v for i in (0, 1) for k, v in SOCKETS})
    assert not plan_of(no_rdma).nccl_check
    pinned = plan_of(with_changes(BASE, {"engine.env": {"NCCL_DEBUG": "WARN"}}))
    assert node_env(pinned, "a")["NCCL_DEBUG"] == "WARN"  # the spec wins; the launcher then says it cannot check
