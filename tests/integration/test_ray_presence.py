"""Ray in the image: NVIDIA's release notes for the NGC vLLM containers (26.05: vLLM 0.20.1, flashinfer,
transformers, flash-attention, xgrammar, Torch) do not say whether Ray ships, so the Ray backend on them
compiles and the launcher checks the image first. A profile that knows the first release without Ray
(ray_absent_from) still makes it a compile error, unless a pre_engine hook installs Ray."""

from __future__ import annotations

import dataclasses

import pytest

from compiler.spec.profiles import RayPresence, find_profile, ray_presence
from tests.specs import compile_spec, diagnostics_text, example, with_changes

NATIVE = example("llama33-70b-2spark-native")  # nvcr.io/nvidia/vllm:26.05-py3
RAY = {"engine.backend": "ray"}


@pytest.mark.parametrize("tag", ["26.05-py3", "26.10-py3", "25.11-py3", "latest"])
def test_the_ngc_profile_leaves_ray_to_the_launchers_check(tag: str) -> None:
    image = f"nvcr.io/nvidia/vllm:{tag}"
    profile = find_profile(image)
    assert profile is not None and ray_presence(profile, image) is RayPresence.CHECK


@pytest.mark.parametrize(("tag", "presence"), [("26.05-py3", "absent"), ("27.01", "absent"), ("25.11-py3", "check")])
def test_a_profile_that_knows_the_first_release_without_ray_answers_by_tag(tag: str, presence: str) -> None:
    profile = find_profile("nvcr.io/nvidia/vllm:latest")
    assert profile is not None
    knows = dataclasses.replace(profile, ray_absent_from=(26, 5))
    assert ray_presence(knows, f"nvcr.io/nvidia/vllm:{tag}") is RayPresence(presence)


def test_ray_backend_on_ngc_2605_compiles_and_the_launcher_checks_for_ray() -> None:
    result = compile_spec(with_changes(NATIVE, RAY))
    assert result.ok, diagnostics_text(result)
    assert "ships without Ray" not in diagnostics_text(result)
    assert result.plan is not None and result.plan.ray_required


def test_a_hook_that_installs_ray_lets_it_compile_and_ray_start_is_the_check() -> None:
    spec = with_changes(NATIVE, {**RAY, "container.hooks.pre_engine": ["pip install --no-cache-dir 'ray[default]'"]})
    result = compile_spec(spec)
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None and not result.plan.ray_required  # no image check before the hooks ran


def test_an_older_release_is_checked_by_the_launcher() -> None:
    result = compile_spec(with_changes(NATIVE, {**RAY, "container.image": "nvcr.io/nvidia/vllm:25.11-py3"}))
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None and result.plan.ray_required


def test_explain_says_where_an_entrypoint_side_effect_runs() -> None:
    seed = example("seed-qwen35-122b-2spark-ray")  # hellohal: its entrypoint caps the GPU clocks
    quirks = compile_spec(seed).plan.quirks  # type: ignore[union-attr]
    assert any(q.startswith("entrypoint side effect on the head (spark-a) only") and "ray start" in q for q in quirks)
    native = compile_spec(with_changes(seed, {"engine.backend": "native"})).plan
    assert native is not None
    assert any(q.startswith("entrypoint side effect kept on every node: sets the GPU clock") for q in native.quirks)
