"""A mount at a tool's default cache folder is dead when the tool's variable points elsewhere: warned."""

from __future__ import annotations

from compiler.diagnostics import Severity
from tests.specs import compile_spec, diagnostics_text, example, with_changes

NATIVE = example("llama33-70b-2spark-native")  # mounts ~/.cache/vllm and ~/.cache/flashinfer, cache off


def _warnings(spec: dict) -> list[str]:
    result = compile_spec(spec, render_files=False)
    assert result.ok, diagnostics_text(result)
    return [d.message for d in result.diagnostics if d.severity is Severity.WARNING and "does not use" in d.message]


def test_cache_mounts_are_used_when_nothing_points_the_tools_elsewhere() -> None:
    assert _warnings(NATIVE) == []


def test_container_cache_makes_the_home_cache_mounts_dead() -> None:
    found = _warnings(with_changes(NATIVE, {"container.cache": {"enabled": True}}))
    assert len(found) == 2
    assert found[0].startswith("vLLM does not use this mount: VLLM_CACHE_ROOT=/var/cache/sparkc/vllm")
    assert "remove the mount: container.cache already keeps it on each node" in found[0]
    assert found[1].startswith("FlashInfer does not use this mount")


def test_a_variable_of_ones_own_pointing_elsewhere_is_named() -> None:
    found = _warnings(with_changes(NATIVE, {"container.env": {"VLLM_CACHE_ROOT": "/scratch/vllm"}}))
    assert found == [
        "vLLM does not use this mount: VLLM_CACHE_ROOT=/scratch/vllm (container.env (VLLM_CACHE_ROOT)) points it "
        "elsewhere; mount at /scratch/vllm instead, or remove the mount"
    ]
    inside = with_changes(NATIVE, {"container.env": {"VLLM_CACHE_ROOT": "/root/.cache/vllm/sub"}})
    assert _warnings(inside) == []
