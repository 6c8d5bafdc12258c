"""vLLM's start check of free memory on unified memory: what the compiler writes for it (the fraction with
kv_cache_memory, the gate's constants, the warnings) and how the launcher's preflight applies it to each
node's /proc/meminfo before anything starts."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.engines.memory import VLLM_INIT_OVERHEAD
from compiler.spec.typed import Source
from tests.fakes.cluster import FakeCluster
from tests.specs import DELETE, EXAMPLES, compile_spec, example, flag_value, flag_values, with_changes

BIG = "side-by-side/llama33-70b-fp8-both"  # 72 GB of weights over TP=2


def _compiled(name: str, changes: dict[str, Any]) -> Any:
    result = compile_spec(with_changes(example(name), changes), str(EXAMPLES / f"{name}.yaml"))
    assert result.ok and result.plan, [d.message for d in result.diagnostics]
    return result


def _warnings(result: Any) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity == "warning"]


def _engine_words(result: Any) -> tuple[str, ...]:
    return tuple(w for group in result.plan.nodes[0].docker_run for w in group)


def test_kv_cache_memory_alone_gets_the_fraction_its_weights_and_kv_cache_need() -> None:
    result = _compiled(BIG, {"engine.gpu_memory_utilization": DELETE, "engine.kv_cache_memory": "20g"})
    words = _engine_words(result)
    # (36 GB per rank + 20 GiB + 4 GiB for activations) / 128 GB = 0.4826, rounded up
    assert flag_value(words, "--gpu-memory-utilization") == "0.49"
    assert flag_value(words, "--kv-cache-memory-bytes") == str(20 * 2**30)
    setting = next(e for e in result.plan.effective if e.setting == "gpu_memory_utilization")
    assert setting.source is Source.DERIVED
    assert result.plan.start_gate.fraction == "0.49"
    assert not any("keep one of them" in w or "still checks" in w for w in _warnings(result))


def test_kv_cache_memory_of_weights_of_unknown_size_is_warned_about_vllms_0_9() -> None:
    result = _compiled("solo-qwen3-32b", {"engine.gpu_memory_utilization": DELETE, "engine.kv_cache_memory": "8g"})
    assert flag_values(_engine_words(result), "--gpu-memory-utilization") == []
    assert result.plan.start_gate.fraction == "0.9"
    assert any("still checks at start that gpu_memory_utilization (default 0.9)" in w for w in _warnings(result))


def test_both_given_no_longer_tells_operators_to_drop_the_fraction() -> None:
    result = _compiled(BIG, {"engine.gpu_memory_utilization": 0.5, "engine.kv_cache_memory": "20g"})
    assert flag_value(_engine_words(result), "--gpu-memory-utilization") == "0.5"
    text = " ".join(_warnings(result))
    assert "only sets its start check" in text and "keep one of them" not in text


def test_the_gate_goes_into_the_launcher_for_vllm_only() -> None:
    result = _compiled("llama33-70b-2spark-native", {})
    gate = result.plan.start_gate
    assert (gate.fraction, gate.ppm, gate.overhead, gate.engine) == ("0.8", 800_000, VLLM_INIT_OVERHEAD, "vLLM")
    launch = result.files["deployment.sh"]
    assert "readonly SPARKC_START_GATE_PPM=800000\n" in launch
    assert f"readonly SPARKC_START_GATE_OVERHEAD_KB={VLLM_INIT_OVERHEAD // 1024}\n" in launch
    # SGLang's fraction is of what is free at start, TensorRT-LLM's of what is free after the load: no gate
    for name in ("sglang-qwen3-30b-2spark", "trtllm-qwen3-235b-2spark-mpi"):
        other = _compiled(name, {})
        assert other.plan.start_gate is None
        assert "readonly SPARKC_START_GATE_PPM=0\n" in other.files["deployment.sh"]


@pytest.mark.parametrize(("changes", "ceiling"), [({"engine.gpu_memory_utilization": 0.85}, True),
                                                  ({"engine.gpu_memory_utilization": DELETE}, True),
                                                  ({}, False)])  # fmt: skip
def test_a_fraction_no_idle_spark_can_start_is_warned_about(changes: dict[str, Any], ceiling: bool) -> None:
    result = _compiled("llama33-70b-2spark-native", changes)
    found = [w for w in _warnings(result) if "has room for at most 0.83: set engine.gpu_memory_utilization" in w]
    assert bool(found) is ceiling, _warnings(result)


# -- preflight on the fakes ----------------------------------------------------------------------------------


def test_preflight_stops_where_a_node_cannot_meet_the_fraction_and_says_the_largest_that_can(
    fake: FakeCluster,
) -> None:
    fake.prepare("llama33-70b-2spark-native")  # gpu_memory_utilization 0.8
    fake.set_meminfo("spark-b", MemAvailable=100_000_000, Cached=30_000_000)
    result = fake.run("launch-cluster.sh")
    assert result.returncode == 1, result.stdout + result.stderr
    # (100,000,000 - 9 GiB in kB) / 127,600,000 kB = 0.7097
    assert (
        "spark-b has 95.3 of 121.6 GiB of memory available, and vLLM would refuse to start: it needs "
        "gpu_memory_utilization 0.8 x 121.6 = 97.3 GiB free after its own init takes about 9.0 GiB, which leaves "
        "86.3 GiB. Fix: set engine.gpu_memory_utilization to at most 0.70"
    ) in result.stderr
    assert "drop the 28.6 GiB of page cache (launch.drop_page_cache: true)" in result.stderr
    assert "spark-a has" not in result.stderr
    assert not any(argv[:1] == ["run"] for _, argv in fake.docker_calls()), "nothing may start"


def test_a_gb10_after_boot_passes_and_the_default_fraction_does_not(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native")
    assert fake.run("launch-cluster.sh", "--preflight-only").returncode == 0
    spec = with_changes(fake.adapt("llama33-70b-2spark-native"), {"engine.gpu_memory_utilization": DELETE})
    fake.compile(spec)
    result = fake.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 1
    assert "it needs vLLM's default gpu_memory_utilization 0.9 x 121.6 = 109.5 GiB free" in result.stdout
    assert "set engine.gpu_memory_utilization to at most 0.88" in result.stdout
