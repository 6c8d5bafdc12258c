"""compile --target slurm: one batch script per deployment, its #SBATCH lines from the spec, every node's docker
run words from the plan, secrets by name only, through the lint gate; specs it cannot run get a clear error."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.output.slurm import SERVING_SECONDS, sbatch_file, slurm_time
from compiler.pipeline import Beside, CompileResult, GeneratedScriptError, Target
from compiler.plan import Plan
from tests.specs import EXAMPLES, ROOT, compile_spec, diagnostics_text, example, with_changes

VALID = sorted(EXAMPLES.glob("*.yaml"))
# What one batch job of docker containers cannot run, and the spec fields each refusal points at.
REFUSED = {
    "qwen3-32b-2spark-hooks": {"container.hooks.patches"},
    "trtllm-qwen3-235b-2spark-mpi": {"engine.backend"},
}
ACCEPTED = [p for p in VALID if p.stem not in REFUSED]


@functools.cache
def _example(path: Path) -> CompileResult:
    text, name = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
    return compile_spec(text, name, beside=Beside(spec_dir=path.parent), target=Target.SLURM)


def compiled(result: CompileResult) -> Plan:
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    return result.plan


def sbatch_options(text: str) -> dict[str, str]:
    """The #SBATCH lines as sbatch reads them: only those before the first command."""
    found = {}
    for line in text.splitlines()[1:]:
        if not line.startswith("#"):
            break
        m = re.fullmatch(r"#SBATCH --([a-z-]+)=(.*)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_slurm_every_example_compiles_or_is_refused_by_name(path: Path) -> None:
    result = _example(path)
    refused = REFUSED.get(path.stem)
    if refused is None:
        plan = compiled(result)
        assert set(result.files) == {sbatch_file(plan), "manifest.json"}
        return
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert {".".join(map(str, d.path)) for d in errors} == refused
    assert all(d.message.startswith("--target slurm: ") and d.line > 0 for d in errors)
    assert not result.files


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_slurm_sbatch_lines_from_the_spec(path: Path) -> None:
    result = _example(path)
    plan = compiled(result)
    options = sbatch_options(result.files[sbatch_file(plan)])
    assert options == {
        "job-name": plan.name,
        "nodes": str(len(plan.nodes)),
        "ntasks-per-node": "1",
        "gpus-per-node": str(plan.nodes[0].gpus),
        "nodelist": ",".join(n.name for n in plan.nodes),
        "time": slurm_time(plan.launch_timeout + SERVING_SECONDS),
    }


def test_slurm_time_is_the_launch_timeout_and_the_serving_default() -> None:
    assert slurm_time(905 + SERVING_SECONDS) == "1-00:15:05"
    assert slurm_time(59) == "0-00:00:59"
    plan = compiled(compile_spec(with_changes(example("solo-qwen3-32b"), {"launch.timeout": 905}), target=Target.SLURM))
    assert plan.launch_timeout == 905


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_slurm_output_matches_snapshot(path: Path, snapshot: Any) -> None:
    """The batch script as reviewed: a change to it shows in the snapshot's diff (--snapshot-update)."""
    result = _example(path)
    plan = compiled(result)
    snapshot.snapshot_dir = Path(__file__).resolve().parent / "snapshots" / "slurm" / path.stem
    snapshot.assert_match(result.files[sbatch_file(plan)], Path(sbatch_file(plan)).name)


def test_slurm_secrets_only_by_name() -> None:
    secret = "value-that-must-never-be-written-0123456789"
    spec = with_changes(example("llama33-70b-2spark-native"), {"container.secrets": ["HF_TOKEN", "OTHER_TOKEN"]})
    result = compile_spec(spec, target=Target.SLURM)
    plan = compiled(result)
    text = result.files[sbatch_file(plan)]
    assert "SPARKC_SECRETS=(HF_TOKEN OTHER_TOKEN)" in text
    assert "-e HF_TOKEN\n" in text and "-e OTHER_TOKEN\n" in text  # docker reads each from the task's environment
    assert all(secret not in t for t in result.files.values())


def test_slurm_refuses_nodes_with_different_gpu_counts() -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"cluster.nodes.1.gpus": 2})
    result = compile_spec(spec, target=Target.SLURM)
    if result.ok:  # the spec itself may refuse it; where it does not, this target must
        pytest.fail("compiled nodes of 1 and 2 GPUs into one --gpus-per-node")
    messages = [d.message for d in result.diagnostics if d.severity is Severity.ERROR]
    assert messages, diagnostics_text(result)


def test_slurm_same_spec_same_bytes() -> None:
    spec = example("sglang-qwen3-30b-2spark")
    first = compile_spec(spec, target=Target.SLURM)
    assert first.ok and first.files == compile_spec(spec, target=Target.SLURM).files


def test_slurm_script_goes_through_the_lint_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.output.slurm as slurm

    monkeypatch.setattr(slurm, "_BODY", slurm._BODY + "echo $unquoted_and_unset\n")
    with pytest.raises(GeneratedScriptError, match=r"\.sbatch:\d+:\d+: .*SC2154"):
        compile_spec(example("solo-qwen3-32b"), target=Target.SLURM, lint_cache=False)


def test_slurm_cli_writes_the_script_and_refuses_with_exit_1(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    spec = str(EXAMPLES / "solo-qwen3-32b.yaml")
    done = runner.invoke(cli, ["compile", spec, "--target", "slurm", "-o", str(out)])
    assert done.exit_code == 0, done.output
    plan = compiled(_example(EXAMPLES / "solo-qwen3-32b.yaml"))
    assert (out / sbatch_file(plan)).is_file() and not (out / "launch-cluster.sh").exists()
    assert f"next: sbatch {out}/{sbatch_file(plan)}" in done.output
    same = runner.invoke(cli, ["compile", spec, "--target", "slurm", "--check", "-o", str(out)])
    assert same.exit_code == 0, same.output
    # the ssh target into the same folder replaces the batch script (the compile's own file)
    again = runner.invoke(cli, ["compile", spec, "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "launch-cluster.sh").is_file() and not (out / "slurm").exists()
    mpi = EXAMPLES / "trtllm-qwen3-235b-2spark-mpi.yaml"
    refused = runner.invoke(cli, ["compile", str(mpi), "--target", "slurm", "-o", str(tmp_path / "t")])
    assert refused.exit_code == 1
    assert f"{mpi}:" in refused.output and "engine.backend: --target slurm: backend mpi" in refused.output


def test_slurm_host_hooks_are_data_and_run_as_the_spec_asks(tmp_path: Path) -> None:
    """cluster.hooks reach the job as the spec wrote them: bash reading the script gets each command back."""
    hooks = ["nvidia-smi -lgc 200,2150", "echo \"$(hostname)\" 'it''s' `id -u` $HOME; true"]
    spec = with_changes(example("llama33-70b-2spark-native"), {"cluster.hooks": {"pre_launch": hooks, "sudo": True}})
    result = compile_spec(spec, target=Target.SLURM)
    plan = compiled(result)
    script = tmp_path / "job.sbatch"
    script.write_text(result.files[sbatch_file(plan)], encoding="utf-8")
    read = subprocess.run(
        [
            "bash",
            "-c",
            'source "$1" && sparkc_values && printf "%s\\0" "$SPARKC_HOST_HOOKS_SUDO" "${SPARKC_HOST_HOOKS[@]}"',
            "-",
            str(script),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert read.stdout.split("\0")[:-1] == ["1", *hooks]


def test_slurm_ray_engine_words_are_the_plans() -> None:
    result = _example(EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml")
    plan = compiled(result)
    text = result.files[sbatch_file(plan)]
    assert plan.ray_engine and "sparkc_ray_engine" in text
    assert f"SPARKC_RAY_IPS=({' '.join(plan.ray_expected_ips)})" in text
    native = _example(EXAMPLES / "llama33-70b-2spark-native.yaml")
    assert "  SPARKC_ENGINE=()\n" in native.files[sbatch_file(compiled(native))]
