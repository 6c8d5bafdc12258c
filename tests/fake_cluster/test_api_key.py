"""An engine with an API key answers 401 on /v1 without it: the launcher's probes and status.sh send
it (read from the environment, or as engine.args gives it), never on a command line or in output."""

from __future__ import annotations

from tests.fakes.cluster import FakeCluster
from tests.specs import compile_spec, example, with_changes

KEY = 'sk-"quoted"\\back\\slash'  # quotes and backslashes survive curl's config syntax


def test_vllm_key_from_a_secret_reaches_the_probes(fake: FakeCluster) -> None:
    fake.compile(with_changes(fake.adapt("llama33-70b-2spark-native"), {"container.secrets": ["VLLM_API_KEY"]}))
    launch = fake.run("launch-cluster.sh", env={"VLLM_API_KEY": KEY}, timeout=120)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "Authorization: Bearer $VLLM_API_KEY" in launch.stdout  # where the key comes from, not the key
    status = fake.run("status.sh", env={"VLLM_API_KEY": KEY})
    assert status.returncode == 0, status.stdout + status.stderr
    everything = launch.stdout + launch.stderr + status.stdout + status.stderr + "\n".join(fake.calls())
    everything += "".join(p.read_text() for p in fake.build.iterdir() if p.is_file())
    assert KEY not in everything

    without = fake.run("status.sh")
    assert without.returncode == 1 and "VLLM_API_KEY is not set here" in without.stderr


def test_a_key_in_engine_args_works_and_is_warned_about(fake: FakeCluster) -> None:
    spec = with_changes(fake.adapt("solo-qwen3-32b"), {"engine.args": ["--api-key", "sk-plain"]})
    result = fake.compile(spec)
    assert any("--api-key writes the key" in d.message for d in result.diagnostics)
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "<the key after --api-key in the spec>" in launch.stdout and "sk-plain" not in launch.stdout
    assert fake.run("status.sh").returncode == 0


def test_sglang_takes_its_key_only_as_a_flag() -> None:
    result = compile_spec(with_changes(example("sglang-qwen3-30b-2spark"), {"engine.args": ["--api-key=k"]}))
    assert result.plan is not None and result.plan.api_key_given == "k" and result.plan.api_key_variable == ""
    assert any("SGLang takes its API key only as --api-key" in d.message for d in result.diagnostics)
