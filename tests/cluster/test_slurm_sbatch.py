"""compile --target slurm's batch scripts read by a real Slurm controller: `sbatch --test-only` parses every
#SBATCH line and the controller answers whether the job could be placed on the nodes it names.

A private slurmctld and munged run in a temporary folder (their own ports, socket and key), with four
1-GPU nodes named as the examples' (cloud nodes, so that no slurmd is needed to plan a job). Needs root and
Debian's slurm-wlm and munge (`apt-get install slurm-wlm munge`); skipped where they are missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compiler.output.slurm import sbatch_file
from compiler.pipeline import Beside, Target
from tests.fakes.cluster import free_port
from tests.specs import EXAMPLES, compile_spec, diagnostics_text, example, with_changes

pytestmark = pytest.mark.cluster

NODES = ("spark-a", "spark-b", "spark-c", "spark-d")
ACCEPTED = [
    p
    for p in sorted(EXAMPLES.glob("*.yaml"))
    if p.stem
    not in {
        "qwen3-32b-2spark-hooks",
        "qwen3-32b-2spark-ray-crosscabled",
        "seed-qwen35-122b-2spark-ray",
        "trtllm-qwen3-235b-2spark-mpi",
    }
]


def _config(folder: Path, name: str) -> str:
    return f"""\
ClusterName={name}
SlurmctldHost=localhost
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmctldLogFile={folder}/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
MpiDefault=none
GresTypes=gpu
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=600
ResumeTimeout=600
NodeName={",".join(NODES)} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=gpu:1 State=CLOUD
PartitionName=sparks Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment that points sbatch at a running private controller."""
    missing = [tool for tool in ("munged", "slurmctld", "sbatch") if shutil.which(tool) is None]
    if missing or os.geteuid() != 0 or not Path("/etc/munge/munge.key").exists():
        pytest.skip(f"a Slurm controller cannot run here (root, slurm-wlm and munge needed; missing: {missing})")
    folder = tmp_path_factory.mktemp("slurm")
    folder.chmod(0o700)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    shutil.copyfile("/etc/munge/munge.key", key)
    key.chmod(0o600)
    name = "sparkc-" + os.environ.get("SPARKC_SIM_NAME", "test")
    (folder / "slurm.conf").write_text(_config(folder, name), encoding="utf-8")
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    munge = [f"--socket={folder}/munge.sock", f"--key-file={key}", f"--pid-file={folder}/munged.pid"]
    munge += [f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"]
    subprocess.run(["munged", "--force", *munge], check=True, env=env)
    try:
        subprocess.run(["slurmctld", "-c", "-i"], check=True, env=env)
        deadline = time.monotonic() + 30
        while subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True).returncode:
            assert time.monotonic() < deadline, (folder / "slurmctld.log").read_text()
            time.sleep(0.2)
        yield env
    finally:
        for pid_file in ("slurmctld.pid", "munged.pid"):
            path = folder / pid_file
            if path.exists():
                subprocess.run(["kill", path.read_text().strip()], check=False)


def submitted_test_only(env: dict[str, str], script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "job.sbatch"
    path.write_text(script, encoding="utf-8")
    return subprocess.run(["sbatch", "--test-only", str(path)], env=env, cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_slurm_controller_places_each_example_on_its_nodes(slurm: dict[str, str], path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    result = compile_spec(text, path.name, beside=Beside(spec_dir=path.parent), target=Target.SLURM)
    assert result.ok and result.plan is not None, diagnostics_text(result)
    plan = result.plan
    done = submitted_test_only(slurm, result.files[sbatch_file(plan)], tmp_path)
    assert done.returncode == 0, done.stderr
    placed = re.search(r"to start at \S+ using \d+ processors on nodes (\S+) in partition", done.stderr)
    assert placed is not None, done.stderr
    assert sorted(placed.group(1).split(",")) == sorted(n.name for n in plan.nodes)


def test_slurm_controller_refuses_more_gpus_than_the_nodes_have(slurm: dict[str, str], tmp_path: Path) -> None:
    # the script's --gpus-per-node reaches the controller: nodes of one GPU cannot hold a job asking for two
    two = {"cluster.nodes.0.gpus": 2, "cluster.nodes.1.gpus": 2, "engine.tensor_parallel": 4}
    result = compile_spec(with_changes(example("llama33-70b-2spark-native"), two), target=Target.SLURM)
    assert result.ok and result.plan is not None, diagnostics_text(result)
    text = result.files[sbatch_file(result.plan)]
    assert "#SBATCH --gpus-per-node=2\n" in text
    done = submitted_test_only(slurm, text, tmp_path)
    assert done.returncode != 0 and "Requested node configuration is not available" in done.stderr
