"""status.sh after a launch on the fakes: the launch's timeline in last-launch.txt and in status.sh's text and
JSON, and what status.sh says of an engine whose /metrics does not answer (the fake engine has none)."""

from __future__ import annotations

import json
import re

from tests.fakes.cluster import FakeCluster


def test_the_timeline_after_a_launch_in_text_and_json(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    record = (fake.build / "last-launch.txt").read_text()
    phases = re.findall(r"^phase\.([a-z0-9-]+)=(\d+) (\d+)$", record, re.M)
    names = [name for name, _, _ in phases]
    assert names[0] == "preflight" and "containers" in names and names[-1] == "readiness", record
    assert [int(start) for _, start, _ in phases] == sorted(int(start) for _, start, _ in phases)
    ready = re.search(r"^ready_after=(\d+)$", record, re.M)
    first = re.search(r"^first_token=(\d+\.\d+)$", record, re.M)
    assert ready and first, record
    assert 0 < float(first.group(1)) < 60

    status = fake.run("status.sh")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"ready in {ready.group(1)}s, first token in {first.group(1)}s" in status.stdout
    assert re.search(r"^  readiness +at +\d+s  took +\d+s$", status.stdout, re.M), status.stdout
    # the fake engine serves no /metrics: said, and the deployment is still healthy
    assert re.search(r"^engine: http://\S+/metrics gives no metrics of vllm$", status.stdout, re.M), status.stdout

    as_json = fake.run("status.sh", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    view = json.loads(as_json.stdout)  # the object alone on stdout; the log lines on stderr
    assert "is healthy" in as_json.stderr
    assert view["healthy"] is True and view["health"].startswith("healthy, serving")
    assert [n["state"] for n in view["nodes"]] == ["running"] and view["ray"] is None
    assert view["metrics"] is None and "gives no metrics" in view["metrics_note"]
    timeline = view["timeline"]
    assert timeline["state"] == "ready" and timeline["ready_after_s"] == int(ready.group(1))
    assert timeline["first_token_s"] == float(first.group(1))
    assert [p["phase"] for p in timeline["phases"]] == names


def test_format_takes_text_or_json(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    for args in (["--format"], ["--format", "yaml"], ["--format", "json", "--all"]):
        ran = fake.run("status.sh", *args)
        assert ran.returncode == 2 and "status.sh: --" in ran.stderr, (args, ran.stderr)


def test_trtllm_says_plainly_it_serves_no_prometheus_metrics(fake: FakeCluster) -> None:
    fake.prepare("trtllm-qwen3-235b-2spark-mpi.yaml")
    status = fake.run("status.sh")  # nothing launched: unhealthy, and the engine line still says why
    assert status.returncode == 1
    assert "engine: TensorRT-LLM (trtllm-serve) serves no Prometheus metrics" in status.stdout, status.stdout
    assert "last launch" not in status.stdout
