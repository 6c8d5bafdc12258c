"""What an operator's first mistakes meet: a generated script run by sh (dash), status.sh on a head whose docker
is down, a compile into a folder that holds another deployment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from tests.fakes.cluster import FakeCluster
from tests.specs import EXAMPLES, compile_into, dump, example, with_changes

# The shells a user may type instead of bash; sh is dash on Debian and Ubuntu, DGX OS included.
SHELLS = [shell for shell in ("sh", "dash", "zsh", "busybox") if shutil.which(shell)]


@pytest.mark.parametrize("shell", SHELLS)
def test_every_generated_script_run_by_another_shell_says_run_it_with_bash(tmp_path: Path, shell: str) -> None:
    build = tmp_path / "build"
    compile_into(example("solo-qwen3-32b"), build)
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(example("llama33-70b-2spark-native")))
    made = CliRunner().invoke(cli, ["setup-fabric", str(spec), "-o", str(build)])
    assert made.exit_code == 0, made.output
    scripts = sorted(p.name for p in build.glob("*.sh") if p.name != "deployment.sh")
    assert "setup-fabric.sh" in scripts and "launch-cluster.sh" in scripts
    argv = [shell, "sh"] if shell == "busybox" else [shell]
    for script in scripts:
        ran = subprocess.run([*argv, script, "--help"], cwd=build, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 2, (script, ran.stdout, ran.stderr)
        assert ran.stderr == f"{script} is a bash script and another shell ran it: run it with bash (bash {script})\n"
        assert ran.stdout == ""
    # deployment.sh is sourced by the scripts beside it, never run: run on its own, by any shell, it says so.
    ran = subprocess.run([*argv, "deployment.sh"], cwd=build, capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and "deployment.sh is read by the scripts beside it" in ran.stderr, ran.stderr
    ran = subprocess.run(["bash", "status.sh", "--help"], cwd=build, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "Usage: status.sh" in ran.stdout, ran.stderr


def test_status_says_docker_is_not_running_rather_than_missing(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b")
    assert fake.run("launch-cluster.sh").returncode == 0
    fake.set("docker-down", "spark-a")
    status = fake.run("status.sh")
    assert status.returncode == 1
    assert "UNKNOWN: docker is not running on spark-a (sudo systemctl start docker)" in status.stdout
    assert "missing" not in status.stdout


def test_status_still_says_missing_for_a_container_docker_does_not_have(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b")
    status = fake.run("status.sh")
    assert status.returncode == 1 and "sparkc-qwen3-32b-spark-a" in status.stdout
    assert status.stdout.split("sparkc-qwen3-32b-spark-a", 1)[1].split("\n", 1)[0].strip() == "missing"


def test_compiling_into_another_deployments_folder_is_refused_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "build"
    runner = CliRunner()
    solo, other = EXAMPLES / "solo-qwen3-32b.yaml", EXAMPLES / "llama33-70b-2spark-native.yaml"
    assert runner.invoke(cli, ["compile", str(solo), "-o", str(out)]).exit_code == 0
    before = (out / "launch-cluster.sh").read_text()
    refused = runner.invoke(cli, ["compile", str(other), "-o", str(out)])
    assert refused.exit_code == 2, refused.output
    assert f"{out} holds the compile of deployment 'qwen3-32b', not 'llama33-70b'" in refused.output
    assert f"-o {out / 'llama33-70b'}" in refused.output and "--force" in refused.output
    assert (out / "launch-cluster.sh").read_text() == before  # nothing written
    # The same deployment compiles again over its own folder, a changed spec too.
    changed = tmp_path / "solo.yaml"
    changed.write_text(dump(with_changes(example("solo-qwen3-32b"), {"engine.max_model_len": 8192})))
    assert runner.invoke(cli, ["compile", str(changed), "-o", str(out)]).exit_code == 0
    forced = runner.invoke(cli, ["compile", str(other), "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "readonly SPARKC_DEPLOYMENT=llama33-70b" in (out / "deployment.sh").read_text()
