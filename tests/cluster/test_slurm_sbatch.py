"""compile --target slurm's batch scripts under a real Slurm: `sbatch --test-only` has the controller parse
every #SBATCH line and place the job on the nodes it names, and a real job runs on two real slurmds.

A private munged, slurmctld and two slurmds (spark-a and spark-b, both on this host, each with its own port
and one GPU that is /dev/null) run in a temporary folder; spark-c and spark-d are cloud nodes, known to the
controller without a slurmd, for the 3- and 4-node examples' placement. The job's containers are the fake
docker's (tests/fakes/bin, on the job's PATH: a task's node is its Slurm node). Needs root and Debian's
slurm-wlm and munge (simcluster/install.sh installs them); skipped where they are missing, failed under CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compiler.output.emit import emit
from compiler.output.slurm import sbatch_file
from compiler.pipeline import Beside, Target
from compiler.plan import flat
from simcluster.fixtures import unavailable
from tests.fakes.cluster import BIN, FakeCluster, free_port
from tests.specs import DELETE, EXAMPLES, compile_spec, diagnostics_text, example, with_changes

pytestmark = pytest.mark.cluster

NODES = ("spark-a", "spark-b", "spark-c", "spark-d")
ACCEPTED = [
    p
    for p in sorted(EXAMPLES.glob("*.yaml"))
    if p.stem
    not in {
        "qwen3-32b-2spark-hooks",  # its container.hooks.patches: placed below without them
        "trtllm-qwen3-235b-2spark-mpi",
    }
]


def _config(folder: Path, name: str) -> str:
    node = f"NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 Gres=gpu:1"
    return f"""\
ClusterName={name}
SlurmctldHost=localhost
SlurmctldPort={free_port()}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
KillWait=10
GresTypes=gpu
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=600
ResumeTimeout=600
NodeName=spark-a NodeHostname=localhost Port={free_port()} {node} State=UNKNOWN
NodeName=spark-b NodeHostname=localhost Port={free_port()} {node} State=UNKNOWN
NodeName=spark-c,spark-d {node} State=CLOUD
PartitionName=sparks Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _until(check: Callable[[], bool], what: str, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + (
            log.read_text() if log.exists() else ""
        )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment that points Slurm's commands at the running private cluster."""
    missing = [tool for tool in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(tool) is None]
    if missing or os.geteuid() != 0:
        unavailable(f"a Slurm cluster needs root, slurm-wlm and munge (missing: {missing or 'root'})")
    folder = tmp_path_factory.mktemp("slurm")
    folder.chmod(0o700)
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))  # the private cluster's own key (munge's minimum is 32 bytes)
    key.chmod(0o600)
    name = "sparkc-" + os.environ.get("SPARKC_SIM_NAME", "test")
    (folder / "slurm.conf").write_text(_config(folder, name), encoding="utf-8")
    (folder / "gres.conf").write_text("AutoDetect=off\nNodeName=spark-a,spark-b Name=gpu File=/dev/null\n")
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    munge = [f"--socket={folder}/munge.sock", f"--key-file={key}", f"--pid-file={folder}/munged.pid"]
    munge += [f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"]
    subprocess.run(["munged", "--force", *munge], check=True, env=env)
    try:
        subprocess.run(["slurmctld", "-c", "-i"], check=True, env=env)
        log = folder / "slurmctld.log"
        _until(
            lambda: not subprocess.run(["scontrol", "ping"], env=env, capture_output=True).returncode, "slurmctld", log
        )
        for node in ("spark-a", "spark-b"):
            subprocess.run(["slurmd", "-N", node], check=True, env=env)

        def idle() -> bool:
            states = subprocess.run(
                ["sinfo", "-h", "-N", "-n", "spark-a,spark-b", "-o", "%t"], env=env, capture_output=True, text=True
            )
            return states.stdout.split() == ["idle", "idle"]

        _until(idle, "spark-a and spark-b idle", log)
        yield env
    finally:
        subprocess.run(["scancel", "--full", "--user=root"], env=env, check=False, capture_output=True)
        for pid_file in ("slurmd-spark-a.pid", "slurmd-spark-b.pid", "slurmctld.pid", "munged.pid"):
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


def test_slurm_controller_places_the_host_hooks_example(slurm: dict[str, str], tmp_path: Path) -> None:
    # cluster.hooks run as a step of the job; the example's patch folder (copied by the ssh target only) left out
    spec = with_changes(example("qwen3-32b-2spark-hooks"), {"container.hooks": DELETE})
    result = compile_spec(spec, target=Target.SLURM)
    assert result.ok and result.plan is not None and result.plan.host_hooks is not None, diagnostics_text(result)
    done = submitted_test_only(slurm, result.files[sbatch_file(result.plan)], tmp_path)
    assert done.returncode == 0, done.stderr
    placed = re.search(r"on nodes (\S+) in partition", done.stderr)
    assert placed is not None and sorted(placed.group(1).split(",")) == sorted(n.name for n in result.plan.nodes)


def test_slurm_controller_refuses_more_gpus_than_the_nodes_have(slurm: dict[str, str], tmp_path: Path) -> None:
    # the script's --gpus-per-node reaches the controller: nodes of one GPU cannot hold a job asking for two
    two = {"cluster.nodes.0.gpus": 2, "cluster.nodes.1.gpus": 2, "engine.tensor_parallel": 4}
    result = compile_spec(with_changes(example("llama33-70b-2spark-native"), two), target=Target.SLURM)
    assert result.ok and result.plan is not None, diagnostics_text(result)
    text = result.files[sbatch_file(result.plan)]
    assert "#SBATCH --gpus-per-node=2\n" in text
    done = submitted_test_only(slurm, text, tmp_path)
    assert done.returncode != 0 and "Requested node configuration is not available" in done.stderr


def test_slurm_real_job_runs_each_nodes_container_waits_ready_and_scancel_removes_them(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    fake = FakeCluster(tmp_path)
    try:
        spec = fake.adapt(example("llama33-70b-2spark-native"))
        result = compile_spec(spec, target=Target.SLURM)
        assert result.ok and result.plan is not None, diagnostics_text(result)
        plan = result.plan
        emit(result.files, fake.build)
        out = tmp_path / "job.out"
        env = {**slurm, "PATH": f"{BIN}:{os.environ['PATH']}", "FAKE_STATE": str(fake.state)}
        env.pop("FAKE_NODE", None)
        submitted = subprocess.run(
            ["sbatch", "--parsable", f"--output={out}", str(fake.build / sbatch_file(plan))],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        job = submitted.stdout.strip().split(";")[0]
        _until(lambda: out.exists() and "READY" in out.read_text(), "READY in the job's output", out, 120)
        runs = {node: argv for node, argv in fake.docker_calls() if argv[:1] == ["run"]}
        for node in plan.nodes:
            assert sorted(["docker", *runs[node.name]]) == sorted(flat(node.docker_run))
            assert runs[node.name][runs[node.name].index("--node-rank") + 1] == str(node.rank)
            assert fake.containers(node.name) == [node.container_name]
        subprocess.run(["scancel", job], env=slurm, check=True)

        def ended() -> bool:
            queue = subprocess.run(["squeue", "-h", "-j", job], env=slurm, capture_output=True, text=True)
            return not queue.stdout.strip()

        _until(ended, f"job {job} to end", out)
        _until(lambda: all(fake.containers(n.name) == [] for n in plan.nodes), "every container removed", out, 30)
    finally:
        fake.shutdown()


def test_slurm_real_ray_job_starts_the_engine_in_the_heads_container_and_scancel_removes_them(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    fake = FakeCluster(tmp_path)
    try:
        result = compile_spec(fake.adapt(example("seed-qwen35-122b-2spark-ray")), target=Target.SLURM)
        assert result.ok and result.plan is not None, diagnostics_text(result)
        plan = result.plan
        emit(result.files, fake.build)
        out = tmp_path / "job.out"
        env = {**slurm, "PATH": f"{BIN}:{os.environ['PATH']}", "FAKE_STATE": str(fake.state)}
        env.pop("FAKE_NODE", None)
        submitted = subprocess.run(
            ["sbatch", "--parsable", f"--output={out}", str(fake.build / sbatch_file(plan))],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        job = submitted.stdout.strip().split(";")[0]
        _until(lambda: out.exists() and "READY" in out.read_text(), "READY in the job's output", out, 120)
        calls = fake.docker_calls()
        runs = [i for i, (_, argv) in enumerate(calls) if argv[:1] == ["run"]]
        execs = [(i, node, argv) for i, (node, argv) in enumerate(calls) if argv[:2] == ["exec", "-d"]]
        assert len(runs) == len(plan.nodes) and len(execs) == 1
        at, node, argv = execs[0]
        assert node == plan.head and at > max(runs) and argv[6:] == ["sparkc-engine", *flat(plan.ray_engine)]
        subprocess.run(["scancel", job], env=slurm, check=True)
        _until(lambda: all(fake.containers(n.name) == [] for n in plan.nodes), "every container removed", out, 60)
    finally:
        fake.shutdown()
