"""Images without Ray: NGC 26.05 and later (its profile says from which release) with the Ray backend is a
compile error, unless a pre_engine hook installs Ray; then the launcher's Ray check is `ray start` itself."""

from __future__ import annotations

import pytest

from compiler.spec.profiles import RayPresence, find_profile, ray_presence
from tests.specs import DELETE, compile_spec, diagnostics_text, example, with_changes

NATIVE = example("llama33-70b-2spark-native")  # nvcr.io/nvidia/vllm:26.05-py3
RAY = {"engine.backend": "ray"}


@pytest.mark.parametrize(
    ("tag", "presence"),
    [
        ("26.05-py3", "absent"),
        ("26.10-py3", "absent"),
        ("27.01", "absent"),
        ("25.11-py3", "check"),
        ("latest", "check"),
    ],
)
def test_the_ngc_profile_knows_which_releases_ship_without_ray(tag: str, presence: str) -> None:
    image = f"nvcr.io/nvidia/vllm:{tag}"
    profile = find_profile(image)
    assert profile is not None and ray_presence(profile, image) is RayPresence(presence)


def test_ray_backend_on_an_image_without_ray_is_a_compile_error() -> None:
    result = compile_spec(with_changes(NATIVE, RAY))
    assert not result.ok
    text = diagnostics_text(result)
    assert "engine.backend: nvcr.io/nvidia/vllm:26.05-py3 ships without Ray" in text
    assert "write engine.backend: native, or install Ray first" in text
    # Left to vLLM's default for several nodes (Ray), the error points at the image.
    result = compile_spec(with_changes(NATIVE, {"engine.backend": DELETE}))
    assert "container.image: nvcr.io/nvidia/vllm:26.05-py3 ships without Ray" in diagnostics_text(result)


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
