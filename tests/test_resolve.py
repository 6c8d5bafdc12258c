"""Resolve on small hand-built specs: per-node settings, entrypoint modes, layout and port rules."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.plan import Plan, flat
from compiler.resolve import resolve
from compiler.schema import load_schema, validate, with_defaults
from compiler.spec import build_spec

BASE: dict[str, Any] = {
    "sparkc": 1,
    "name": "demo",
    "cluster": {"nodes": [
        {"name": "a", "ssh": "a.lan", "fabric": {"ip": "10.0.0.1", "netdev": "enp1s0f1np1",
                                                 "hcas": ["rocep1s0f1", "roceP2p1s0f1"]}},
        {"name": "b", "ssh": "b.lan", "fabric": {"ip": "10.0.0.2", "netdev": "enp1s0f0np0",
                                                 "hcas": ["rocep1s0f0", "roceP2p1s0f0"]}},
    ]},
    "container": {"image": "vllm/vllm-openai:v0.11.2"},
    "model": {"path": "/srv/m"},
    "engine": {"kind": "vllm", "tensor_parallel": 2},
}


def build(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = spec
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[last] = value
    return spec


def run(spec: dict[str, Any]) -> tuple[Plan | None, list]:
    schema = load_schema()
    problems = validate(spec, schema)
    assert not problems, problems
    return resolve(build_spec(with_defaults(spec, schema), spec), spec_path="t.yaml", spec_sha256="0" * 64)


def plan_of(spec: dict[str, Any]) -> Plan:
    plan, diagnostics = run(spec)
    assert plan is not None, [d.message for d in diagnostics]
    return plan


def env(plan: Plan, node: str) -> dict[str, str]:
    return {s.name: s.value for s in next(n for n in plan.nodes if n.name == node).env}


def messages(spec: dict[str, Any], severity: Severity = Severity.ERROR) -> list[str]:
    return [d.message for d in run(spec)[1] if d.severity is severity]


def test_every_fabric_setting_is_per_node() -> None:
    plan = plan_of(build())
    assert plan.start_waves == (("a",), ("b",))  # Ray: the head first
    a, b = env(plan, "a"), env(plan, "b")
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES",
                 "OMPI_MCA_btl_tcp_if_include"):
        assert (a[name], b[name]) == ("enp1s0f1np1", "enp1s0f0np0")
    assert (a["VLLM_HOST_IP"], b["VLLM_HOST_IP"]) == ("10.0.0.1", "10.0.0.2")
    assert (a["RAY_NODE_IP_ADDRESS"], b["RAY_OVERRIDE_NODE_IP_ADDRESS"]) == ("10.0.0.1", "10.0.0.2")
    assert a["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1" and b["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
    assert a["MASTER_ADDR"] == b["MASTER_ADDR"] == "10.0.0.1"
    assert a["NCCL_IB_DISABLE"] == "0" and "NCCL_IB_GID_INDEX" not in a
    assert a["RAY_memory_monitor_refresh_ms"] == "0" and a["HF_HUB_OFFLINE"] == "1"
    assert a["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert a["VLLM_ENGINE_READY_TIMEOUT_S"] == str(3600 - 60)
    worker = flat(plan.nodes[1].docker_run)
    assert "--node-ip-address=10.0.0.2" in worker and "--address=10.0.0.1:6379" in worker


def test_gid_index_only_where_pinned_and_no_hcas_means_sockets() -> None:
    spec = build(cluster__nodes__1__env={"NCCL_IB_GID_INDEX": 3})
    spec["cluster"]["nodes"][0]["fabric"]["hcas"] = []
    plan = plan_of(spec)
    assert "NCCL_IB_GID_INDEX" not in env(plan, "a") and env(plan, "b")["NCCL_IB_GID_INDEX"] == "3"
    assert env(plan, "a")["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env(plan, "a")
    assert any("same transport" in m for m in messages(spec, Severity.WARNING))
    assert "--device" not in flat(plan.nodes[0].docker_run)


def test_sources_say_where_values_came_from() -> None:
    spec = build(cluster__nodes__0__env={"NCCL_DEBUG": "INFO"})
    plan = plan_of(spec)
    settings = {s.name: s for s in plan.nodes[0].env}
    assert settings["NCCL_DEBUG"].source == "spec"
    assert settings["VLLM_HOST_IP"].source == "derived"
    assert settings["HF_HUB_OFFLINE"].source == "default"
    top = {s.name: s for s in plan.settings}
    assert top["backend"].source == "default" and top["backend"].value == "ray"
    assert top["api_port"].value == "8000" and top["api_port"].source == "default"


def test_head_can_be_any_node_and_comes_first() -> None:
    plan = plan_of(build(cluster__head="b"))
    assert [n.name for n in plan.nodes] == ["b", "a"] and plan.nodes[0].ssh_target == ""
    assert env(plan, "a")["MASTER_ADDR"] == "10.0.0.2"


def test_native_backend_ranks_and_order() -> None:
    plan = plan_of(build(engine__backend="native"))
    head, worker = plan.nodes
    assert plan.start_waves == (("b",), ("a",))
    assert flat(worker.docker_run)[-9:] == ("--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                                      "--master-port", "29501", "--headless")
    assert "--headless" not in flat(head.docker_run)
    # vllm/vllm-openai keeps its `vllm serve` entrypoint: the words are engine arguments only
    image_at = flat(head.docker_run).index("vllm/vllm-openai:v0.11.2")
    assert flat(head.docker_run)[image_at + 1] == "/srv/m"


def test_single_node_defaults_to_native_without_rendezvous_flags() -> None:
    spec = build(engine__tensor_parallel=1)
    spec["cluster"]["nodes"].pop()
    plan = plan_of(spec)
    assert plan.backend == "native" and plan.start_waves == (("a",),)
    assert "--nnodes" not in flat(plan.nodes[0].docker_run)


def test_hellohal_modes() -> None:
    base = build(container__image="hellohal2064/vllm-qwen3.5-gb10:latest", engine__port=30000,
                 engine__max_model_len=4096, model__mount="/models/q")
    adapt = plan_of(base)
    assert adapt.entrypoint_mode == "adapt"
    assert env(adapt, "a")["PORT"] == "30000" and env(adapt, "a")["MODEL_PATH"] == "/models/q"
    assert adapt.api_port == 30000
    assert flat(adapt.ray_engine) == ("/app/entrypoint.sh", "--served-model-name", "/models/q",
                                     "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
                                     "--distributed-executor-backend", "ray")

    keep_spec = copy.deepcopy(base)
    keep_spec["container"]["entrypoint"] = "keep"
    keep = plan_of(keep_spec)
    effective = {e.setting: e for e in keep.effective}
    assert keep.api_port == 8000 and effective["port"].differs
    assert effective["max_model_len"].effective == "8192" and effective["model_path"].effective == "/models/model"
    assert keep.served_model_name == "/models/model"
    warnings = messages(keep_spec, Severity.WARNING)
    assert any("8000, not 30000" in w for w in warnings) and any("8192, not 4096" in w for w in warnings)
    assert "PORT" not in env(keep, "a")

    keep_spec["container"]["env"] = {"PORT": 30000}
    assert plan_of(keep_spec).api_port == 30000  # keep computes what the image will do with the env it gets

    bypass_spec = copy.deepcopy(base)
    bypass_spec["container"]["entrypoint"] = "bypass"
    bypass_spec["engine"]["backend"] = "native"
    bypass = plan_of(bypass_spec)
    run_argv = flat(bypass.nodes[0].docker_run)
    assert run_argv[run_argv.index("--entrypoint") + 1] == "vllm"
    assert any("skips: sets the GPU clock limit" in q for q in bypass.quirks)


def test_layout_and_architecture_rules() -> None:
    assert any("3 x 1 = 3" in m for m in messages(build(engine__tensor_parallel=3)))
    spec = build(engine__tensor_parallel=3, model__architecture={"attention_heads": 64})
    spec["cluster"]["nodes"][1]["gpus"] = 2
    found = messages(spec)
    assert any("does not divide the model's 64 attention heads" in m and "pipeline_parallel: 3" in m
               for m in found)


def test_ports_must_be_distinct_and_clear_of_ray() -> None:
    assert any("is also the API port" in m for m in messages(build(launch={"ray_port": 8000})))
    assert any("Ray dashboard" in m for m in messages(build(engine__port=8265)))
    native = build(engine__backend="native", launch={"master_port": 8000})
    assert any("rendezvous port" in m for m in messages(native))


def test_topology_ring_sets_nccl_routing() -> None:
    a = env(plan_of(build(cluster__topology="ring")), "a")
    assert a["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1" and a["NCCL_ALGO"] == "Ring" and a["NCCL_NET_PLUGIN"] == "none"
    assert "NCCL_ALGO" not in env(plan_of(build()), "a")


def test_single_twin_and_wrong_hca_warn() -> None:
    spec = build()
    spec["cluster"]["nodes"][0]["fabric"]["hcas"] = ["rocep1s0f0"]
    warnings = messages(spec, Severity.WARNING)
    assert any("only one RDMA device" in w for w in warnings)
    assert any("belongs to RDMA device rocep1s0f1" in w for w in warnings)


def test_secrets_by_name_only() -> None:
    plan = plan_of(build(container__secrets=["HF_TOKEN"]))
    argv = flat(plan.nodes[0].docker_run)
    assert argv[argv.index("HF_TOKEN") - 1] == "-e" and not any(a.startswith("HF_TOKEN=") for a in argv)
    assert any("looks like a secret" in m for m in messages(build(engine__env={"WANDB_API_KEY": "x"})))
    assert any("looks like a secret" in m for m in messages(build(engine__env={"AWS_SECRET_ACCESS_KEY": "x"})))
    assert not messages(build(engine__env={"TOKENIZERS_PARALLELISM": "false"}))


def test_sglang_native_flags() -> None:
    plan = plan_of(build(engine__kind="sglang", container__image="lmsysorg/sglang:v0.5.4",
                         engine__max_model_len=8192, engine__gpu_memory_utilization=0.8))
    argv = flat(plan.nodes[1].docker_run)
    assert plan.backend == "native" and plan.api_port == 30000
    assert "--dist-init-addr" in argv and argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:29501"
    assert argv[argv.index("--context-length") + 1] == "8192"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.8"
    assert env(plan, "b")["SGLANG_HOST_IP"] == "10.0.0.2" and "VLLM_HOST_IP" not in env(plan, "b")


@pytest.mark.parametrize("privileged, expected", [(True, "--privileged"), (False, "IPC_LOCK")])
def test_container_flags(privileged: bool, expected: str) -> None:
    plan = plan_of(build(container__privileged=privileged, container__ulimits={"memlock": None, "nofile": "1024:2048"},
                         container__gpus="none"))
    argv = flat(plan.nodes[0].docker_run)
    assert expected in argv and "--gpus" not in argv
    assert "memlock=-1" not in argv and "nofile=1024:2048" in argv and "stack=67108864" in argv
    assert "/srv/m:/srv/m:ro" in argv


def test_nccl_check_defaults_and_expectations() -> None:
    on = plan_of(build())
    assert on.nccl_check and env(on, "b")["NCCL_DEBUG"] == "INFO"
    assert [n.nccl_transport for n in on.nodes] == ["IB", ""]  # Ray: the head's log carries every rank
    native = plan_of(build(engine__backend="native"))
    assert [n.nccl_transport for n in native.nodes] == ["IB", "IB"]
    off = plan_of(build(launch={"nccl_check": False}))
    assert not off.nccl_check and "NCCL_DEBUG" not in env(off, "a")
    no_rdma = build()
    for node in no_rdma["cluster"]["nodes"]:
        node["fabric"]["hcas"] = []
    assert not plan_of(no_rdma).nccl_check
    pinned = plan_of(build(engine__env={"NCCL_DEBUG": "WARN"}))
    assert env(pinned, "a")["NCCL_DEBUG"] == "WARN"  # the spec wins; the launcher then says it cannot check
