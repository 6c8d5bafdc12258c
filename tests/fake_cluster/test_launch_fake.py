"""Run the generated scripts against fake `ssh` and `docker` on PATH that record every call.

The fakes keep per-node container state; an engine that comes up is a real local HTTP server and a
Ray head a real listener, so the launcher's port and HTTP probes run for real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import flag_value, with_changes

HELLOHAL = "hellohal2064/vllm-qwen3.5-gb10:latest"


# -- the happy paths ----------------------------------------------------------------------------


def test_ray_seed_launch_status_logs_stop(fake: FakeCluster, tmp_path: Path) -> None:
    spec = fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "READY" in launch.stdout and f"127.0.0.1:{spec['engine']['port']}" not in launch.stderr
    calls = fake.calls()
    # the worker is reached over ssh with BatchMode, the head's docker is used locally
    assert any(c.startswith("ssh aurora@spark-b.local docker run") for c in calls)
    assert not any(c.startswith("ssh") and "spark-a" in c.split()[1] for c in calls)
    head = fake.container("spark-a", "sparkc-qwen35-122b-spark-a")
    worker = fake.container("spark-b", "sparkc-qwen35-122b-spark-b")
    assert head["words"][:2] == worker["words"][:2] == ["ray", "start"] and "--head" in head["words"]
    assert flag_value(worker["words"], "--address") == f"127.0.0.1:{spec['launch']['ray_port']}"
    assert head["env"]["VLLM_HOST_IP"] == "127.0.0.1" and worker["env"]["VLLM_HOST_IP"] == "127.0.0.2"
    assert "--rm" not in head["flags"] and not any(f.startswith("--restart") for f in head["flags"])
    # the engine went through the image's entrypoint (adapt) with the variables it reads
    assert head["engine"][:3] == ["vllm", "serve", "/models/Qwen3.5-122B-A10B-FP8"]
    assert head["env"]["PORT"] == str(spec["engine"]["port"]) and head["env"]["MAX_MODEL_LEN"] == "4096"
    # phases ran in order: preflight before any run, Ray check before the engine exec
    steps = [
        argv[:2]
        for _, argv in fake.docker_calls("spark-a")
        if argv[:2] in (["run", "-d"], ["exec", "-d"]) or argv[2:4] == ["python3", "-c"]
    ]
    assert steps[0] == ["run", "-d"] and steps[-1] == ["exec", "-d"]

    status = fake.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "healthy" in status.stdout and "spark-b" in status.stdout

    logs = fake.run("logs.sh", "--out", str(tmp_path / "gathered"))
    assert logs.returncode == 0, logs.stderr
    assert "ray start" in (tmp_path / "gathered" / "spark-b.log").read_text()
    assert (tmp_path / "gathered" / "spark-a.state").read_text().strip().endswith("exit=0")

    again = fake.run("launch-cluster.sh")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr

    stop = fake.run("stop-cluster.sh")
    assert stop.returncode == 0, stop.stderr
    assert fake.containers("spark-a") == [] and fake.containers("spark-b") == []
    stops = [node for node, argv in fake.docker_calls() if argv[0] == "stop"]
    assert stops == ["spark-b", "spark-a"]  # workers first, then the head

    relaunch = fake.run("launch-cluster.sh")
    assert relaunch.returncode == 0, relaunch.stdout + relaunch.stderr


def test_native_launch_starts_workers_first_then_rank0(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native.yaml")
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    runs = [node for node, argv in fake.docker_calls() if argv[:2] == ["run", "-d"] and not fake.is_probe(argv)]
    assert runs == ["spark-b", "spark-a"]
    worker = fake.container("spark-b", "sparkc-llama33-70b-spark-b")
    head = fake.container("spark-a", "sparkc-llama33-70b-spark-a")
    assert "--headless" in worker["words"] and "--enable-prefix-caching" in worker["words"]  # engine.args too
    assert "--headless" not in head["words"]
    assert worker["env"]["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0" and head["env"]["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert worker["env"]["MASTER_ADDR"] == head["env"]["MASTER_ADDR"] == "127.0.0.1"
    # nvcr keeps its entrypoint: the command runs as given
    assert head["words"][:2] == ["/opt/nvidia/nvidia_entrypoint.sh", "vllm"]


@pytest.mark.parametrize("backend", ["ray", "native"])
@pytest.mark.parametrize("mode", ["bypass", "adapt", "keep"])
def test_hellohal_entrypoint_modes_come_up_where_the_manifest_says(fake: FakeCluster, backend: str, mode: str) -> None:
    changes = {"container.entrypoint": mode, "engine.backend": backend}
    if mode == "keep":
        changes["model.mount"] = "/models/model"  # the path this entrypoint serves whatever it is told
    spec = with_changes(fake.adapt("seed-qwen35-122b-2spark-ray.yaml"), changes)
    result = fake.compile(spec)
    manifest = json.loads(result.files["manifest.json"])
    effective = {e["setting"]: e for e in manifest["plan"]["effective"]}
    expected_port = 8000 if mode == "keep" else spec["engine"]["port"]
    assert int(effective["port"]["effective"]) == expected_port == manifest["plan"]["api_port"]
    if mode == "keep":
        assert effective["max_model_len"]["effective"] == "8192"
        assert any("8000" in d.message for d in result.diagnostics)
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert f":{expected_port}/v1" in launch.stdout
    head = fake.container("spark-a", "sparkc-qwen35-122b-spark-a")
    engine_words = head.get("engine") or head["words"]
    assert flag_value(engine_words, "--port") == str(expected_port)
    if mode == "bypass":
        assert "PORT" not in head["env"]


# -- the failures -------------------------------------------------------------------------------


def test_engine_crash_fails_fast_saves_logs_and_keeps_containers(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native.yaml")
    fake.set("crash", "spark-a")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "FAILED in phase readiness on node spark-a" in launch.stderr
    assert "CUDA out of memory (fake)" in launch.stderr  # the last lines of the failing node
    logs = sorted((fake.build / "logs").iterdir())
    assert len(logs) == 1
    assert "CUDA out of memory" in (logs[0] / "spark-a.log").read_text()
    assert (logs[0] / "spark-b.log").exists() and "phase=readiness" in (logs[0] / "failure.txt").read_text()
    assert fake.containers("spark-a") and fake.containers("spark-b")  # kept for inspection


def test_ray_engine_crash_is_seen_through_its_exit_file(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    fake.set("crash", "spark-a")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "engine exited with status 1" in launch.stderr


@pytest.mark.parametrize(
    "example_name, node",
    [("seed-qwen35-122b-2spark-ray.yaml", "spark-a"), ("llama33-70b-2spark-native.yaml", "spark-b")],
)
def test_nccl_falling_back_to_sockets_fails_the_launch(fake: FakeCluster, example_name: str, node: str) -> None:
    healthy = fake.prepare(example_name)
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "== fabric" in launch.stdout and "NCCL channels via NET/IB" in launch.stdout
    assert fake.run("launch-cluster.sh", "--yes").returncode == 0  # replaced, still on RDMA
    assert "probe transport IB" in launch.stdout
    fake.set("nccl-socket", node)
    # The probe sees it before the engine starts: no engine container was started at all.
    probed = fake.run("launch-cluster.sh", "--yes")
    assert probed.returncode == 1
    assert f"FAILED in phase probe on node {node}: the fabric probe failed: {node}: NCCL used Socket" in probed.stderr
    assert "NCCL_IB_HCA" in probed.stderr and "--no-probe" in probed.stderr
    # Without the probe, the check after readiness reads the engine's own NCCL lines.
    fallback = fake.run("launch-cluster.sh", "--yes", "--no-probe")
    assert fallback.returncode == 1
    assert f"FAILED in phase fabric on node {node}: NCCL fell back to sockets" in fallback.stderr
    fake.compile(with_changes(healthy, {"launch.nccl_check": False, "launch.probe": False}))
    assert fake.run("launch-cluster.sh", "--yes").returncode == 0  # the operator accepted sockets


def docker_runs(fake: FakeCluster, node: str = "") -> list[list[str]]:
    return [argv for _, argv in fake.docker_calls(node) if argv[:2] == ["run", "-d"]]


def test_a_container_that_does_not_start_names_its_node(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native.yaml")
    fake.set("run-fails", "spark-b")
    probed = fake.run("launch-cluster.sh")  # the probe's container is the first to meet it
    assert probed.returncode == 1
    assert "FAILED in phase probe on node spark-b: could not start the probe container: docker: Error" in probed.stderr
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 1
    assert (
        "FAILED in phase containers on node spark-b: docker run failed on spark-b: docker: Error response"
        in launch.stderr
    )
    engine_runs = [argv for argv in docker_runs(fake, "spark-a") if not fake.is_probe(argv)]
    assert not engine_runs  # rank 0 waits for its wave: never started


def test_unreachable_worker_stops_preflight(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    fake.unreachable("spark-b")
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1
    assert "FAILED in phase preflight on node spark-b" in launch.stderr
    assert "ssh-copy-id aurora@spark-b.local" in launch.stderr
    assert not docker_runs(fake)


def test_fabric_address_checked_per_node_at_preflight(fake: FakeCluster) -> None:
    spec = fake.prepare("llama33-70b-2spark-native.yaml")
    fake.add_netdev("spark-a", "enp1s0f1np1", "127.0.0.1", mtu=1500)  # reset by a firmware update
    fake.compile(with_changes(spec, {"cluster.nodes.1.fabric.netdev": "enp1s0f1np1"}))  # spark-b has enp1s0f0np0
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1
    assert "FAILED in phase preflight on node spark-b: network interface enp1s0f1np1 does not exist" in launch.stderr
    assert "spark-a: enp1s0f1np1 has MTU 1500" in launch.stderr
    assert not docker_runs(fake)
    fake.compile(with_changes(spec, {"cluster.nodes.1.fabric.ip": "127.0.0.9"}))  # not this node's address
    launch = fake.run("launch-cluster.sh")
    assert "127.0.0.9 is not an address of enp1s0f0np0 on spark-b (it has: inet 127.0.0.2/24" in launch.stderr


def test_a_fabric_addresses_entry_missing_on_its_netdev_stops_preflight_with_the_fix(fake: FakeCluster) -> None:
    spec = fake.prepare("llama33-70b-2spark-native.yaml")
    addressed = with_changes(
        spec,
        {
            "cluster.nodes.0.fabric.addresses": {"enP2p1s0f1np1": "127.0.1.1"},
            "cluster.nodes.1.fabric.addresses": {"enP2p1s0f0np0": "127.0.1.2"},
        },
    )
    fake.add_netdev("spark-b", "enP2p1s0f0np0", "127.0.1.9")  # spark-a has no twin at all
    fake.compile(addressed)
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and not docker_runs(fake)
    assert (
        "spark-a: network interface enP2p1s0f1np1 (cluster.nodes[].fabric.addresses) does not exist on spark-a"
        in launch.stderr
    )
    assert (
        "spark-b: 127.0.1.2 (cluster.nodes[].fabric.addresses) is not an address of enP2p1s0f0np0 on spark-b (it "
        "has: inet 127.0.1.9/24): run setup-fabric.sh (sparkc setup-fabric SPEC -o DIR writes it)"
    ) in launch.stderr, launch.stderr
    fake.add_netdev("spark-a", "enP2p1s0f1np1", "127.0.1.1")
    fake.add_netdev("spark-b", "enP2p1s0f0np0", "127.0.1.2")
    launch = fake.run("launch-cluster.sh")
    assert "fabric.addresses" not in launch.stderr and docker_runs(fake), launch.stderr


def test_image_missing_or_different_on_a_worker(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    fake.add_image("spark-b", HELLOHAL, image_id="sha256:" + "b" * 64, entrypoint=["/app/entrypoint.sh"])
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and "differs between nodes" in launch.stderr
    shutil.rmtree(fake.state / "nodes" / "spark-b" / "images")
    (fake.state / "nodes" / "spark-b" / "images").mkdir()
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and f"image {HELLOHAL} is not on spark-b" in launch.stderr
    assert f"docker save {HELLOHAL} | ssh aurora@spark-b.local docker load" in launch.stderr


def test_ray_missing_from_image(fake: FakeCluster) -> None:
    spec = fake.adapt("seed-qwen35-122b-2spark-ray.yaml")
    for node in ("spark-a", "spark-b"):
        fake.add_image(node, "vllm/vllm-openai:v0.19.0", entrypoint=["vllm", "serve"], ray=False)
    fake.compile(with_changes(spec, {"container.image": "vllm/vllm-openai:v0.19.0"}))
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and "Ray is not in image" in launch.stderr


def test_profile_mismatch_stops_keep_and_adapt(fake: FakeCluster) -> None:
    spec = fake.adapt("seed-qwen35-122b-2spark-ray.yaml")
    for node in ("spark-a", "spark-b"):
        fake.add_image(node, HELLOHAL, entrypoint=["/opt/start.sh"])
    fake.compile(spec)
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and "no longer matches profile" in launch.stderr


def test_running_deployment_needs_yes_to_replace(fake: FakeCluster) -> None:
    spec = fake.prepare("solo-qwen3-32b.yaml")
    assert fake.run("launch-cluster.sh").returncode == 0
    fake.compile(with_changes(spec, {"engine.max_model_len": 8192}))  # another spec, same deployment
    refused = fake.run("launch-cluster.sh")
    assert refused.returncode == 1 and "--yes" in refused.stderr
    replaced = fake.run("launch-cluster.sh", "--yes")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr


def test_foreign_container_with_our_name_is_never_removed(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    d = fake.state / "nodes" / "spark-a" / "containers" / "sparkc-qwen3-32b-spark-a"
    d.mkdir(parents=True)
    (d / "meta.json").write_text(
        json.dumps(
            {"name": d.name, "labels": {}, "env": {}, "words": [], "status": "running", "image": "x", "flags": []}
        )
    )
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 1 and "was not created by deployment" in launch.stderr
    assert fake.containers("spark-a") == ["sparkc-qwen3-32b-spark-a"]
    assert not any(argv[0] == "rm" for _, argv in fake.docker_calls())


def test_dry_run_touches_nothing(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    dry = fake.run("launch-cluster.sh", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert fake.calls() == []
    spark_b_run = dry.stdout.rsplit("[spark-b] docker run \\\n    -d \\\n", 1)[1].split("\n[", 1)[0]  # not the probe
    assert "    --name sparkc-qwen35-122b-spark-b \\\n" in spark_b_run  # one flag per line, the node's own name
    assert "[spark-a] docker exec \\\n    -d \\\n    sparkc-qwen35-122b-spark-a \\\n    sh \\\n    -c " in dry.stdout
    assert "[spark-b] sh -c <preflight: host docker model weights draft mounts fabric" in dry.stdout  # preflight shown
    assert "image=hellohal2064/vllm-qwen3.5-gb10:latest" in dry.stdout


def test_hostile_values_stay_data(fake: FakeCluster, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    fake.compile(
        with_changes(
            fake.adapt("solo-qwen3-32b.yaml"),
            {
                "model.name": f"x'$(touch {canary})\"`touch {canary}`",
                "engine.args": [f"--chat-template=$(touch {canary}); touch {canary}"],
                "container.env": {"GREETING": f"a b; touch {canary} 'q'"},
            },
        )
    )
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert not canary.exists()
    head = fake.container("spark-a", "sparkc-qwen3-32b-spark-a")
    assert head["env"]["GREETING"] == f"a b; touch {canary} 'q'"
    assert f"--chat-template=$(touch {canary}); touch {canary}" in head["words"]  # one word, as written
    assert fake.run("status.sh").returncode == 0 and not canary.exists()


def test_secrets_reach_workers_without_a_command_line(fake: FakeCluster) -> None:
    fake.compile(with_changes(fake.adapt("llama33-70b-2spark-native.yaml"), {"container.secrets": ["HF_TOKEN"]}))
    missing = fake.run("launch-cluster.sh")
    assert missing.returncode == 1 and "secret HF_TOKEN is not set" in missing.stderr
    launch = fake.run("launch-cluster.sh", env={"HF_TOKEN": "hf_s3cret"})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert fake.container("spark-b", "sparkc-llama33-70b-spark-b")["env"]["HF_TOKEN"] == "hf_s3cret"
    assert fake.container("spark-a", "sparkc-llama33-70b-spark-a")["env"]["HF_TOKEN"] == "hf_s3cret"
    everything = "\n".join(fake.calls()) + launch.stdout + launch.stderr
    everything += "".join(p.read_text() for p in fake.build.iterdir() if p.is_file())
    assert "hf_s3cret" not in everything


def test_stop_reports_an_unreachable_node(fake: FakeCluster) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    assert fake.run("launch-cluster.sh").returncode == 0
    fake.unreachable("spark-b")
    stop = fake.run("stop-cluster.sh")
    assert stop.returncode == 1 and "spark-b: unreachable" in stop.stderr
    assert fake.containers("spark-a") == []
    status = fake.run("status.sh")
    assert status.returncode == 1 and "UNREACHABLE" in status.stdout


def test_usage_errors_exit_2(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    for script, args in (
        ("launch-cluster.sh", ["--bogus"]),
        ("launch-cluster.sh", ["--timeout", "soon"]),
        ("stop-cluster.sh", ["-x"]),
        ("status.sh", ["now"]),
        ("logs.sh", ["--tail"]),
    ):
        result = fake.run(script, *args)
        assert result.returncode == 2, (script, args, result.stderr)
    assert "Usage: launch-cluster.sh" in fake.run("launch-cluster.sh", "--help").stdout


def test_the_draft_model_is_judged_from_the_one_preflight_round_trip(fake: FakeCluster, tmp_path: Path) -> None:
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text("{}")
    spec = fake.adapt("llama33-70b-2spark-native.yaml")
    fake.compile(
        with_changes(spec, {"model.draft": {"path": str(draft), "mount": "/models/draft", "num_speculative_tokens": 3}})
    )
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    before_run = fake.calls()[: next(i for i, c in enumerate(fake.calls()) if '"run", "-d"' in c)]
    to_worker = [c for c in before_run if c.startswith("ssh") and "spark-b" in c.split()[1]]
    # The preflight script only (it starts by setting container_format): nothing asked of the draft apart.
    assert len(to_worker) == 1 and to_worker[0].startswith("ssh aurora@spark-b.local sh -c container_format=")
    assert fake.run("stop-cluster.sh").returncode == 0

    runs = len(docker_runs(fake))
    (draft / "w.safetensors").symlink_to(draft / "never-copied")
    dangling = fake.run("launch-cluster.sh")
    assert dangling.returncode == 1 and "FAILED in phase preflight on node spark-a" in dangling.stderr
    assert f"{draft}/w.safetensors on spark-a is a link to a file that does not exist" in dangling.stderr
    assert f"also on spark-b: {draft}/w.safetensors on spark-b" in dangling.stderr

    shutil.rmtree(draft)
    missing = fake.run("launch-cluster.sh")
    assert missing.returncode == 1
    assert f"draft model directory {draft} does not exist on spark-a" in missing.stderr
    assert f"also on spark-b: draft model directory {draft} does not exist on spark-b" in missing.stderr
    assert len(docker_runs(fake)) == runs  # both stopped at preflight: nothing started
