"""compile --target slurm's batch script run under a fake srun (tests/fakes/bin/srun: one task per node, its
Slurm variables set, nodes numbered in the node table's order) and the fake docker: each node's container gets
its own rank and values, the endpoint's readiness is awaited on the head, and every container is removed
when the job is cancelled."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compiler.output.emit import emit
from compiler.output.slurm import sbatch_file
from compiler.pipeline import Target
from compiler.plan import Plan, flat
from tests.fakes.cluster import BIN, FakeCluster
from tests.specs import compile_spec, diagnostics_text, with_changes

SGLANG = "sglang-qwen3-30b-2spark"
VLLM = "llama33-70b-2spark-native"


def prepared(fake: FakeCluster, name: str, changes: dict[str, Any] | None = None) -> tuple[Plan, Path]:
    """An example adapted to the fakes, its head named so that it sorts after its worker (Slurm's node IDs
    then put the worker first), compiled for Slurm into the fake's build folder."""
    spec = example_on_fakes(fake, name, changes or {})
    result = compile_spec(spec, target=Target.SLURM)
    assert result.ok and result.plan is not None, diagnostics_text(result)
    emit(result.files, fake.build)
    return result.plan, fake.build / sbatch_file(result.plan)


def example_on_fakes(fake: FakeCluster, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    from tests.specs import example

    adapted = fake.adapt(with_changes(example(name), {"cluster.nodes.0.name": "spark-z"}))
    return with_changes(adapted, changes) if changes else adapted


def job_env(fake: FakeCluster, plan: Plan, **extra: str) -> dict[str, str]:
    """The batch script's environment inside an allocation of the plan's nodes (as sbatch sets it)."""
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "FAKE_STATE": str(fake.state),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": ",".join(n.name for n in plan.nodes),
        **extra,
    }
    env.pop("FAKE_NODE", None)
    return env


def until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def started(fake: FakeCluster, plan: Plan) -> dict[str, list[str]]:
    """Each node's `docker run` argv as the fake docker received it."""
    return {node: argv for node, argv in fake.docker_calls() if argv[:1] == ["run"]}


def test_slurm_each_task_runs_its_own_nodes_container_with_its_own_rank(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, SGLANG)
    assert sorted(n.name for n in plan.nodes) != [n.name for n in plan.nodes]  # SLURM_NODEID 0 is the worker
    fake.set("record-only")
    # The step exactly as the script starts it (the script sourced defines its functions and runs nothing).
    step = subprocess.Popen(
        ["bash", "-c", 'source "$1" && sparkc_values && sparkc_start_nodes', "sbatch", str(sbatch)],
        env=job_env(fake, plan),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    until(lambda: len(started(fake, plan)) == len(plan.nodes), "every node's docker run")
    runs = started(fake, plan)
    for node in plan.nodes:
        argv = ["docker", *runs[node.name]]
        # the plan's words, every one, in the order the ssh launcher runs them (shared options first)
        assert sorted(argv) == sorted(flat(node.docker_run))
        image = argv.index(plan.image)
        assert argv[image:] == list(flat(node.docker_run))[list(flat(node.docker_run)).index(plan.image) :]
        assert argv[argv.index("--node-rank") + 1] == str(node.rank)
        assert fake.container(node.name, node.container_name) is not None
    ranks = {argv[argv.index("--node-rank") + 1] for argv in runs.values()}
    assert ranks == {str(n.rank) for n in plan.nodes} and len(ranks) == len(plan.nodes)
    # scancel: SIGTERM to every process of the batch step (here the shell and srun), which srun passes to
    # every task: each removes its own container
    os.killpg(step.pid, signal.SIGTERM)
    _, err = step.communicate(timeout=30)
    assert step.returncode == 143, err  # srun (in the shell's place) ends with its tasks' status
    for node in plan.nodes:
        assert fake.containers(node.name) == []
    # each task said which node it found itself on, by name, with Slurm's numbers beside
    assert "spark-z (Slurm node 1, task 1): rank 0" in err
    assert "spark-b (Slurm node 0, task 0): rank 1" in err


def test_slurm_job_waits_for_the_endpoint_and_removes_every_container_on_cancel(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, VLLM)
    log = fake.root / "job.out"
    with log.open("w") as out:
        job = subprocess.Popen(["bash", str(sbatch)], env=job_env(fake, plan), stdout=out, stderr=subprocess.STDOUT)
    try:
        until(lambda: "READY" in log.read_text(), "READY in the job's output", 90)
    finally:
        job.send_signal(signal.SIGTERM)  # scancel signals the batch shell
        job.wait(timeout=30)
    text = log.read_text()
    assert job.returncode == 143, text
    assert f"READY: {plan.served_model_name} at {plan.endpoint_url}/v1" in text
    for node in plan.nodes:
        assert fake.containers(node.name) == [], text
    # the readiness probes ran as one step on the head alone
    steps = (fake.state / "srun.jsonl").read_text()
    assert f'"--nodelist={plan.head}"' in steps


def test_slurm_cancelled_job_refusing_new_steps_still_removes_containers(fake: FakeCluster) -> None:
    # Once a job is being cancelled Slurm starts no step: the cleanup's own srun fails, the tasks' traps remain.
    plan, sbatch = prepared(fake, VLLM)
    fake.set("record-only")
    log = fake.root / "job.out"
    with log.open("w") as out:
        job = subprocess.Popen(["bash", str(sbatch)], env=job_env(fake, plan), stdout=out, stderr=subprocess.STDOUT)
    until(lambda: len(started(fake, plan)) == len(plan.nodes), "every node's docker run")
    fake.set("srun-refused")
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=30)
    assert job.returncode == 143, log.read_text()
    for node in plan.nodes:
        assert fake.containers(node.name) == []


def test_slurm_secret_from_the_job_environment_reaches_the_containers(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, VLLM, {"container.secrets": ["HF_TOKEN"]})
    secret = "hf_value-only-in-the-environment"
    assert secret not in sbatch.read_text()
    missing = subprocess.run(["bash", str(sbatch)], env=job_env(fake, plan), capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2
    assert "the secret HF_TOKEN is not set: export it before sbatch" in missing.stderr
    assert not started(fake, plan)
    fake.set("record-only")
    step = subprocess.Popen(
        ["bash", "-c", 'source "$1" && sparkc_values && sparkc_start_nodes', "sbatch", str(sbatch)],
        env=job_env(fake, plan, HF_TOKEN=secret),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    until(lambda: len(started(fake, plan)) == len(plan.nodes), "every node's docker run")
    for node in plan.nodes:
        assert runs_pair(started(fake, plan)[node.name], "HF_TOKEN") == ["-e", "HF_TOKEN"]
        container = fake.container(node.name, node.container_name)
        assert container is not None and container["env"]["HF_TOKEN"] == secret
    os.killpg(step.pid, signal.SIGTERM)
    step.communicate(timeout=30)
    assert all(fake.containers(node.name) == [] for node in plan.nodes)


def runs_pair(argv: list[str], name: str) -> list[str]:
    at = argv.index(name)
    return argv[at - 1 : at + 1]


@pytest.mark.parametrize("node_name", ["spark-x"])
def test_slurm_task_on_a_node_not_in_the_spec_fails_naming_it(fake: FakeCluster, node_name: str) -> None:
    plan, sbatch = prepared(fake, VLLM)
    env = job_env(fake, plan, SLURM_JOB_NODELIST=f"{plan.head},{node_name}")
    fake.add_node(node_name)
    done = subprocess.run(
        ["bash", "-c", 'source "$1" && sparkc_values && sparkc_start_nodes', "sbatch", str(sbatch)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert f"Slurm node {node_name} is none of this deployment's nodes" in done.stderr


RAY = "seed-qwen35-122b-2spark-ray"


def test_slurm_ray_job_starts_the_engine_in_the_heads_container_once_every_node_runs(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, RAY)
    head = next(n for n in plan.nodes if n.name == plan.head)
    log = fake.root / "job.out"
    with log.open("w") as out:
        job = subprocess.Popen(["bash", str(sbatch)], env=job_env(fake, plan), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while "READY" not in log.read_text() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=30)
    text = log.read_text()
    assert "READY" in text and job.returncode == 143, text
    calls = fake.docker_calls()
    runs = [i for i, (_, argv) in enumerate(calls) if argv[:1] == ["run"]]
    execs = [i for i, (_, argv) in enumerate(calls) if argv[:2] == ["exec", "-d"]]
    assert len(runs) == len(plan.nodes) and len(execs) == 1, calls
    node, argv = calls[execs[0]]
    # on the head, in its container, through the library's wrapper, the plan's engine words: after every
    # node's container started (Ray reported them all)
    assert node == plan.head and argv[2] == head.container_name
    assert argv[3:5] == ["sh", "-c"] and "/tmp/sparkc-engine.exit" in argv[5]
    assert argv[6:] == ["sparkc-engine", *flat(plan.ray_engine)]
    assert execs[0] > max(runs)
    # a worker's container (ray start --address) only once the head's Ray port answered
    head_run = next(i for i in runs if calls[i][0] == plan.head)
    assert head_run == min(runs) and f"waiting for the Ray head at {plan.head_fabric_ip}:{plan.ray_port}" in text
    ray_checks = [i for i, (_, a) in enumerate(calls) if a[:3] == ["exec", head.container_name, "python3"]]
    assert ray_checks and max(ray_checks) < execs[0]
    assert f"ray: {len(plan.nodes)}/{len(plan.nodes)} nodes alive" in text
    assert f"READY: {plan.served_model_name} at {plan.endpoint_url}/v1" in text
    for n in plan.nodes:  # removing the containers ends the engine too
        assert fake.containers(n.name) == [], text


def test_slurm_ray_job_fails_when_the_engine_exits_before_ready(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, RAY)
    fake.set("crash")
    done = subprocess.run(["bash", str(sbatch)], env=job_env(fake, plan), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "exited with status 1 (its log is above)" in done.stderr
    assert all(fake.containers(n.name) == [] for n in plan.nodes)


HOOK_SEEN = (
    'echo "$SLURMD_NODENAME $(ls "$FAKE_STATE/nodes/$SLURMD_NODENAME/containers" | wc -l)" >>"$FAKE_STATE/hooks"'
)
HOOK_DATA = 'printf \'%s\\n\' "it\'s \\$HOME" >>"$FAKE_STATE/hooks"'


def test_slurm_host_hooks_run_once_on_every_node_before_its_container(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, VLLM, {"cluster.hooks": {"pre_launch": [HOOK_SEEN, HOOK_DATA]}})
    fake.set("record-only")
    log = fake.root / "job.out"
    with log.open("w") as out:
        job = subprocess.Popen(["bash", str(sbatch)], env=job_env(fake, plan), stdout=out, stderr=subprocess.STDOUT)
    try:
        until(lambda: len(started(fake, plan)) == len(plan.nodes), "every node's docker run")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
    text = log.read_text()
    seen = (fake.state / "hooks").read_text().splitlines()
    # each node once, no container there yet; the second command's words reached sh as the spec wrote them
    assert sorted(line for line in seen if not line.startswith("it's")) == sorted(f"{n.name} 0" for n in plan.nodes)
    assert seen.count("it's $HOME") == len(plan.nodes), seen
    for n in plan.nodes:
        assert f"{n.name}: host hook pre_launch[1] done" in text
    steps = (fake.state / "srun.jsonl").read_text().splitlines()
    # the hooks' step first, on every node; the containers' step after it ended
    assert steps[0].endswith('sparkc_values\\nsparkc_host_hooks"]') and "--nodelist" not in steps[0]
    assert any(step.endswith('sparkc_values\\nsparkc_node_task"]') for step in steps[1:])


def test_slurm_host_hook_that_fails_stops_the_job_before_any_container(fake: FakeCluster) -> None:
    plan, sbatch = prepared(fake, VLLM, {"cluster.hooks": {"pre_launch": ["echo no clocks; exit 7"]}})
    done = subprocess.run(["bash", str(sbatch)], env=job_env(fake, plan), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    # --kill-on-bad-exit: the first node whose hook fails ends the step (as the ssh launcher stops at the first),
    # so the others may be ended before they report; at least one names itself, and no container started.
    failed = [
        n.name
        for n in plan.nodes
        if f"host hook pre_launch[0] failed on {n.name} with status 7: echo no clocks; exit 7 (it said: no clocks)"
        in done.stderr
    ]
    assert failed, done.stderr
    assert not started(fake, plan)


def test_slurm_readiness_refuses_an_api_key_that_would_be_a_line_of_curls_config(
    fake: FakeCluster, tmp_path: Path
) -> None:
    # The key travels to curl as a config text on stdin (curl -K -): a line break in it would start a line of
    # curl's own options, here one that writes a file. The launcher's own check refuses it before any request.
    from tests.specs import example

    result = compile_spec(example("solo-qwen3-32b-api-key"), target=Target.SLURM)
    assert result.ok and result.plan is not None, diagnostics_text(result)
    plan = result.plan
    emit(result.files, tmp_path / "build")
    sbatch = tmp_path / "build" / sbatch_file(plan)
    planted = tmp_path / "written-by-curl"
    key = f"sk-1\noutput = {planted}"
    probe = subprocess.run(
        ["bash", "-c", 'source "$1" && sparkc_values && sparkc_wait_ready', "sbatch", str(sbatch)],
        env=job_env(fake, plan, VLLM_API_KEY=key),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.returncode == 1, probe.stderr
    assert "the API key in VLLM_API_KEY holds a control character" in probe.stderr
    assert not planted.exists()
