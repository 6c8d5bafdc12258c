"""What the caller's environment and launch-cluster.sh's options can do to a launch: a trace turned on
from outside prints no secret, --timeout and --env take only what the spec could hold, --skip-preflight
still needs the secrets, and an API key with a line break never becomes curl's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import with_changes

pytestmark = pytest.mark.security

NATIVE = "llama33-70b-2spark-native"
SECRET = "hf_Tr4ceMe-secret"


@pytest.fixture
def native(fake: FakeCluster) -> FakeCluster:
    """The native example on the fakes, with its secret HF_TOKEN and the API key in VLLM_API_KEY."""
    fake.compile(with_changes(fake.adapt(NATIVE), {"container.secrets": ["HF_TOKEN", "VLLM_API_KEY"]}))
    return fake


def secrets(key: str = "sk-good") -> dict[str, str]:
    return {"HF_TOKEN": SECRET, "VLLM_API_KEY": key}


@pytest.mark.parametrize("how", ["SHELLOPTS", "BASH_ENV"])
def test_a_trace_turned_on_by_the_caller_prints_no_secret(how: str, native: FakeCluster, tmp_path: Path) -> None:
    rc = tmp_path / "trace.sh"
    rc.write_text("set -x\n", encoding="utf-8")
    env = {"SHELLOPTS": "xtrace"} if how == "SHELLOPTS" else {"BASH_ENV": str(rc)}
    for script, *args in (["launch-cluster.sh", "--dry-run"], ["status.sh"]):
        run = native.run(script, *args, env={**secrets(), **env})
        assert SECRET not in run.stdout + run.stderr, f"{script} traced the secret"


@pytest.mark.parametrize("timeout", ["119", "1", "2147483648", "99999999999999999999", "0120", "12s"])
def test_timeout_outside_what_the_spec_takes_is_refused(timeout: str, native: FakeCluster) -> None:
    run = native.run("launch-cluster.sh", "--dry-run", "--timeout", timeout, env=secrets())
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--timeout needs whole seconds from 120 to 2147483647" in run.stderr


def test_timeout_within_bounds_is_taken(native: FakeCluster) -> None:
    for timeout in ("120", "2147483647"):
        run = native.run("launch-cluster.sh", "--dry-run", "--timeout", timeout, env=secrets())
        assert run.returncode == 0 and f"timeout {timeout}s" in run.stdout, run.stderr


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x1b[2Jb", "a\u2028b", "a\x85b"])
def test_env_values_with_control_characters_are_refused(value: str, native: FakeCluster) -> None:
    run = native.run("launch-cluster.sh", "--dry-run", "--env", f"EXTRA={value}", env=secrets())
    assert run.returncode == 2 and "--env EXTRA: control characters" in run.stderr, run.stderr


def test_skip_preflight_still_needs_the_secrets(native: FakeCluster) -> None:
    run = native.run("launch-cluster.sh", "--skip-preflight", env={"VLLM_API_KEY": "sk-good"})
    assert run.returncode == 1 and "secret HF_TOKEN is not set" in run.stderr, run.stdout + run.stderr
    assert native.calls() == [], "a node was touched"


def test_an_api_key_with_a_line_break_is_refused_before_any_node(native: FakeCluster, tmp_path: Path) -> None:
    written = tmp_path / "written"
    run = native.run("launch-cluster.sh", env=secrets(f"sk\noutput = {written}"))
    assert run.returncode == 1 and "holds a control character" in run.stderr, run.stdout + run.stderr
    assert native.calls() == [], "a node was touched"


def test_status_never_gives_curl_a_key_line_as_configuration(native: FakeCluster, tmp_path: Path) -> None:
    launch = native.run("launch-cluster.sh", env=secrets(), timeout=120)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    written = tmp_path / "written"
    status = native.run("status.sh", env=secrets(f"sk-good\noutput = {written}"))
    assert not written.exists(), "curl read the key's second line as its option `output`"
    assert "holds a control character" in status.stderr, status.stdout + status.stderr
