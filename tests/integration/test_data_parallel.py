"""Data and expert parallel: vLLM's multi-node data parallel (the head serves the API and waits for every
other node's engines on its RPC port; the others run --headless from their first rank), SGLang's attention
data parallel inside one tensor-parallel group, expert parallel for both, the TP x PP x DP layout, and each
refusal with its field and the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.pipeline import CompileResult
from tests.specs import (
    DELETE,
    compile_spec,
    container_command,
    diagnostics_text,
    example,
    flag_value,
    with_changes,
)

DP = example("qwen3-30b-a3b-2spark-dp-ep")
SGLANG = with_changes(
    example("sglang-qwen3-30b-2spark"),
    {"engine.tensor_parallel": 1, "engine.data_parallel": 2, "engine.expert_parallel": True},
)
# Flags of vLLM's other multi-node mode (one replica over the nodes), which data parallel does not use.
NNODES_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--distributed-executor-backend")


def _ok(spec: dict[str, Any]) -> CompileResult:
    result = compile_spec(spec)
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    return result


def _lines(result: CompileResult, severity: Severity = Severity.ERROR) -> list[str]:
    """The diagnostics of one severity, as sparkc prints them (spec.yaml:LINE:COL: field: message)."""
    text = diagnostics_text(result).splitlines()
    return [line for line in text if (" warning" in line) == (severity is Severity.WARNING) and ": " in line]


def _at(lines: list[str], field: str, words: str) -> str:
    found = [line for line in lines if f": {field}: " in line and words in line]
    assert len(found) == 1, "\n".join(lines)
    assert re.match(r"spec\.yaml:\d+:\d+: ", found[0]), found[0]
    return found[0]


def test_vllm_head_serves_and_waits_the_other_node_runs_headless_from_its_rank() -> None:
    plan = _ok(DP).plan
    assert plan is not None
    head, worker = container_command(plan, "spark-a"), container_command(plan, "spark-b")
    for argv in (head, worker):
        assert flag_value(argv, "--data-parallel-size") == "2"
        assert flag_value(argv, "--data-parallel-size-local") == "1"
        assert flag_value(argv, "--data-parallel-address") == "192.168.100.10"
        assert flag_value(argv, "--data-parallel-rpc-port") == "29550"
        assert flag_value(argv, "--tensor-parallel-size") == "1"
        assert "--enable-expert-parallel" in argv
        assert not [w for w in argv if w in NNODES_FLAGS]
    # A start rank on the head would switch vLLM to its hybrid load balancing (an API on every node).
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert "--headless" in worker and flag_value(worker, "--data-parallel-start-rank") == "1"
    # The nodes meet on the head's RPC port, not on a rendezvous.
    assert [(p.port, p.what) for p in plan.head_ports] == [(8000, "API"), (29550, "data-parallel RPC")]


def test_several_gpus_per_node_hold_several_replicas_each() -> None:
    spec = with_changes(DP, {"cluster.nodes.0.gpus": 2, "cluster.nodes.1.gpus": 2, "engine.data_parallel": 4})
    plan = _ok(spec).plan
    assert plan is not None
    head, worker = container_command(plan, "spark-a"), container_command(plan, "spark-b")
    assert flag_value(head, "--data-parallel-size-local") == "2"
    assert flag_value(worker, "--data-parallel-size-local") == "2"
    assert flag_value(worker, "--data-parallel-start-rank") == "2"
    assert flag_value(head, "--data-parallel-size") == "4"


def test_one_node_runs_every_replica_without_an_address() -> None:
    spec = with_changes(
        example("solo-qwen3-32b"),
        {"cluster.nodes.0.gpus": 2, "engine.data_parallel": 2, "model.architecture": DELETE},
    )
    plan = _ok(spec).plan
    assert plan is not None
    argv = container_command(plan, plan.nodes[0].name)
    assert flag_value(argv, "--data-parallel-size") == "2"
    assert flag_value(argv, "--data-parallel-size-local") == "2"
    assert "--data-parallel-address" not in argv and "--headless" not in argv
    assert [p.what for p in plan.head_ports] == ["API"]


def test_sglang_runs_attention_data_parallel_inside_one_tensor_parallel_group() -> None:
    plan = _ok(SGLANG).plan
    assert plan is not None
    for node in plan.nodes:
        argv = container_command(plan, node.name)
        # SGLang's world is its tensor-parallel group; attention DP and expert parallel divide it.
        assert flag_value(argv, "--tp-size") == "2"
        assert flag_value(argv, "--attn-dp-size") == "2"
        assert flag_value(argv, "--ep-size") == "2"
        assert "--dp-size" not in argv and "--enable-dp-attention" not in argv
    assert (29514, "attention-DP handshake") in [(p.port, p.what) for p in plan.head_ports]


def test_expert_parallel_alone_spreads_the_experts_over_tensor_parallel() -> None:
    plan = _ok(with_changes(example("sglang-qwen3-30b-2spark"), {"engine.expert_parallel": True})).plan
    assert plan is not None
    argv = container_command(plan, "spark-a")
    assert flag_value(argv, "--ep-size") == "2" and flag_value(argv, "--tp-size") == "2"
    assert "--attn-dp-size" not in argv


def test_explain_shows_data_and_expert_parallel_only_where_asked() -> None:
    rows = {s.name: s for s in _ok(DP).plan.settings}  # type: ignore[union-attr]
    assert rows["data_parallel"].value == "2" and rows["expert_parallel"].value == "on"
    assert rows["data_parallel_rpc_port"].value == "29550"
    assert "data parallel" in rows["backend"].why
    plain = {s.name for s in _ok(example("llama33-70b-2spark-native")).plan.settings}  # type: ignore[union-attr]
    assert not plain & {"data_parallel", "expert_parallel", "data_parallel_rpc_port"}


# -- refusals ---------------------------------------------------------------------------------------


def test_the_layout_counts_data_parallel() -> None:
    result = compile_spec(with_changes(DP, {"engine.data_parallel": 3}))
    line = _at(_lines(result), "engine.data_parallel", "1 x 1 x 3 = 3, but the nodes have 2 GPUs")
    assert "write data_parallel: 2" in line


def test_vllm_refuses_a_replica_split_over_nodes() -> None:
    spec = with_changes(
        DP, {"cluster.nodes.0.gpus": 3, "engine.tensor_parallel": 2, "model.architecture.experts": DELETE}
    )
    line = _at(_lines(compile_spec(spec)), "engine.data_parallel", "spark-a has 3 GPUs")
    assert "runs each replica on one node" in line and "data_parallel: 1" in line


def test_vllm_data_parallel_refuses_ray() -> None:
    line = _at(_lines(compile_spec(with_changes(DP, {"engine.backend": "ray"}))), "engine.backend", "data parallel")
    assert "write engine.backend: native" in line


def test_the_rpc_port_joins_the_port_clash_checks() -> None:
    result = compile_spec(with_changes(DP, {"launch.data_parallel_rpc_port": 8000}))
    _at(_lines(result), "launch.data_parallel_rpc_port", "data-parallel RPC port 8000 is also the API port")
    # Where the user wrote the API port and left the RPC port to its default, the API port is where to look.
    spec = with_changes(DP, {"launch.data_parallel_rpc_port": DELETE, "engine.port": 29550})
    _at(_lines(compile_spec(spec)), "engine.port", "is also the API port")


def test_sglang_handshake_port_must_exist_and_be_free() -> None:
    result = compile_spec(with_changes(SGLANG, {"launch.master_port": 65530}))
    assert "at most 65522" in _at(_lines(result), "launch.master_port", "master_port + 13 = 65543")
    result = compile_spec(with_changes(SGLANG, {"launch.master_port": 29987}))  # + 13 = the API's 30000
    _at(_lines(result), "launch.master_port", "attention-DP handshake port 30000 is also the API port")


def test_sglang_needs_experts_that_divide_evenly() -> None:
    spec = with_changes(SGLANG, {"model.architecture.experts": 127})
    line = _at(_lines(compile_spec(spec)), "engine.expert_parallel", "127 experts over 2 GPUs")
    assert "remove expert_parallel" in line


def test_vllm_takes_uneven_experts_with_a_warning() -> None:
    result = compile_spec(with_changes(DP, {"model.architecture.experts": 127}))
    assert result.ok
    _at(_lines(result, Severity.WARNING), "engine.expert_parallel", "first ranks one expert more")


def test_expert_parallel_needs_an_expert_for_every_gpu_and_more_than_one_gpu() -> None:
    result = compile_spec(with_changes(DP, {"model.architecture.experts": 1}))
    _at(_lines(result), "engine.expert_parallel", "leaves 1 of them without an expert (the model has 1)")
    solo = with_changes(example("solo-qwen3-32b"), {"engine.expert_parallel": True})
    result = compile_spec(solo)
    assert result.ok
    _at(_lines(result, Severity.WARNING), "engine.expert_parallel", "over one GPU changes nothing")


def test_without_expert_parallel_tensor_parallel_must_still_divide_the_experts() -> None:
    spec = with_changes(DP, {"engine.expert_parallel": False, "model.architecture.experts": 3})
    assert compile_spec(spec).ok  # tensor_parallel 1 divides 3
    spec = with_changes(
        DP,
        {
            "cluster.nodes.0.gpus": 2,
            "cluster.nodes.1.gpus": 2,
            "engine.tensor_parallel": 2,
            "engine.expert_parallel": False,
            "model.architecture.experts": 3,
        },
    )
    _at(_lines(compile_spec(spec)), "engine.tensor_parallel", "does not divide the model's 3 experts")


@pytest.mark.parametrize(
    ("words", "field"),
    [
        (["--data-parallel-size", "4"], "engine.data_parallel"),
        (["-dp", "4"], "engine.data_parallel"),
        (["--headless"], "engine.backend"),
        (["--data-parallel-backend", "ray"], "engine.backend"),
        (["--data-parallel-hybrid-lb"], "engine.data_parallel"),
        (["--no-enable-expert-parallel"], "engine.expert_parallel"),
    ],
)
def test_engine_args_cannot_change_the_data_parallel_plan(words: list[str], field: str) -> None:
    line = _at(_lines(compile_spec(with_changes(DP, {"engine.args": words}))), "engine.args[0]", "set by sparkc")
    assert line.endswith(f"use {field} instead")


def test_engine_args_may_repeat_what_the_plan_gives_every_node() -> None:
    result = _ok(with_changes(DP, {"engine.args": ["--data-parallel-size", "2", "--enable-expert-parallel"]}))
    assert not _lines(result, Severity.WARNING)


@pytest.mark.parametrize("words", [["--attn-dp-size", "4"], ["--enable-dp-attention"], ["--ep", "1"]])
def test_sglang_engine_args_cannot_change_it_either(words: list[str]) -> None:
    _at(_lines(compile_spec(with_changes(SGLANG, {"engine.args": words}))), "engine.args[0]", "set by sparkc")


def test_the_fabric_check_waits_for_traffic_that_crosses_it() -> None:
    # Expert parallel exchanges tokens between the replicas over NCCL: its transport is checked.
    assert _ok(DP).plan.nccl_check  # type: ignore[union-attr]
    # Dense replicas, each whole on its node, send nothing over NCCL across the fabric: nothing to read.
    dense = _ok(with_changes(DP, {"engine.expert_parallel": False})).plan
    assert dense is not None and not dense.nccl_check
    rows = {s.name: s for s in dense.settings}
    assert rows["nccl_check"].value == "off" and "exchange nothing" in rows["nccl_check"].why
