"""engine.args against the flags sparkc sets: every spelling the engine's parser takes is recognised;
a repeat that agrees with the plan is kept (and explain says so), one that conflicts is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.specs import compile_spec, example, with_changes


def outcome(name: str, args: list[str], **changes: Any) -> tuple[list[str], tuple[str, ...]]:
    spec = with_changes(example(name), {"engine.args": args, **changes})
    result = compile_spec(spec, render_files=False)
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    return errors, result.plan.quirks if result.plan else ()


@pytest.mark.parametrize(
    "args",
    [
        ["--max_model_len", "8192"],  # vLLM reads _ as -
        ["--max-model-len=8192"],
        ["--max-model", "8192"],  # an argparse abbreviation
        ["-tp", "4"],
        ["-tp=4"],
        ["--tensor_parallel_size=4"],
        ["--gpu_memory_utilization", "0.95"],
        ["--distributed-executor-backend", "ray"],  # the native example runs mp
        ["--node-rank", "0"],  # differs per node: never the user's to set
    ],
)
def test_vllm_conflicting_spellings_are_refused(args: list[str]) -> None:
    errors, _ = outcome("llama33-70b-2spark-native", args)
    assert len(errors) == 1 and "is set by sparkc" in errors[0], errors


@pytest.mark.parametrize(
    "args",
    [
        ["--distributed-executor-backend", "mp"],  # what vLLM runs without Ray anyway
        ["--tensor-parallel-size", "2"],
        ["-tp=2"],
        ["--max_model_len", "32768"],
        ["--gpu-memory-utilization", "0.80"],
        ["--trust-remote-code"],
    ],
)
def test_vllm_repeats_that_agree_are_kept_and_explained(args: list[str]) -> None:
    errors, quirks = outcome("llama33-70b-2spark-native", args, **{"engine.trust_remote_code": True})
    assert errors == []
    assert any(q.startswith(f"engine.args repeats {args[0].split('=')[0]}") for q in quirks), quirks


@pytest.mark.parametrize(
    ("args", "ok"),
    [
        (["--tensor-parallel-size", "4"], False),  # SGLang's own long spelling of --tp
        (["--tp-size", "2"], True),
        (["--pipeline-parallel-size", "2"], False),
        (["--pp-size", "1"], True),  # SGLang's default, which sparkc leaves out
        (["--context-length", "1024"], False),
        (["--mem-fraction-static=0.75"], True),
        (["--mem_fraction_static", "0.9"], False),
        (["--model", "/elsewhere"], False),
    ],
)
def test_sglang_spellings(args: list[str], ok: bool) -> None:
    errors, _ = outcome("sglang-qwen3-30b-2spark", args)
    assert (errors == []) is ok, errors


def test_multi_node_sglang_switches_off_the_memory_balance_check() -> None:
    result = compile_spec(example("sglang-qwen3-30b-2spark"))
    assert result.plan is not None
    env = {s.name: s.value for s in result.plan.nodes[1].env}
    assert env["SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"] == "0" and env["SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK"] == "1"
