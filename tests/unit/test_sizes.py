"""Sizes read as docker's units parser reads them; what docker refuses is refused with its rule."""

from __future__ import annotations

import pytest

from compiler.sizes import size_bytes
from tests.specs import compile_spec, docker_run_words, example, flag_value, with_changes


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1024", 1024),
        ("0", 0),
        ("1024b", 1024),
        ("64m", 64 * 1024**2),
        ("64M", 64 * 1024**2),
        ("96gb", 96 * 1024**3),
        ("96GB", 96 * 1024**3),
        ("16GiB", 16 * 1024**3),
        ("16 g", 16 * 1024**3),
        ("10.24g", 10995116277),  # float product cut toward zero, as docker computes it
        ("10.24gb", 10995116277),
        ("1t", 1024**4),
        ("2p", 2 * 1024**5),
        ("0.5k", 512),
    ],
)
def test_sizes_docker_accepts(text: str, expected: int) -> None:
    assert size_bytes(text) == expected
    assert size_bytes(expected) == expected


@pytest.mark.parametrize(
    "text", ["", "g", "16gi", "16x", "16 gb ", "16  g", "-1", "1.5.3", "1e3", "16kbb", "16bb", "16ib", ".5g", "5.g"]
)
def test_sizes_docker_refuses_are_refused(text: str) -> None:
    assert size_bytes(text) is None


def test_shm_size_is_inert_beside_ipc_host_so_it_is_dropped_with_a_warning() -> None:
    """docker mounts the host's /dev/shm into a container with --ipc host and ignores --shm-size."""
    for spelling in ("16g", "16GB", "16 GiB", 17179869184, "17179869184"):
        result = compile_spec(with_changes(example("solo-qwen3-32b"), {"container.shm_size": spelling}))
        assert result.ok and result.plan is not None, result.diagnostics
        words = docker_run_words(result.plan.nodes[0])
        assert flag_value(words, "--ipc") == "host" and "--shm-size" not in words
        (warning,) = [d for d in result.diagnostics if d.path == ("container", "shm_size")]
        assert warning.severity.value == "warning" and "--ipc host" in warning.message
        assert "remove it" in warning.message


def test_bad_size_is_refused_with_docker_rule() -> None:
    result = compile_spec(with_changes(example("solo-qwen3-32b"), {"container.shm_size": "16gi"}))
    assert not result.ok
    (message,) = [d.message for d in result.diagnostics]
    assert "'16gi' must be a size as docker reads it" in message and "10.24gb" in message


def test_size_too_large_for_docker() -> None:
    result = compile_spec(with_changes(example("solo-qwen3-32b"), {"container.shm_size": "9000000p"}))
    assert [d.path for d in result.diagnostics if d.severity.value == "error"] == [("container", "shm_size")]
