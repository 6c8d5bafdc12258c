"""Bounded container logs: every container gets docker's json-file driver with max-size and max-file
(defaults, or container.logs), and logs.sh reads them with --since and --follow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.cluster import BIN, FakeCluster
from tests.specs import compile_spec, diagnostics_text, docker_run_words, example, flag_values, with_changes

SOLO = "solo-qwen3-32b.yaml"


def test_every_container_gets_bounded_json_file_logs_by_default() -> None:
    plan = compile_spec(example("seed-qwen35-122b-2spark-ray.yaml")).plan
    assert plan is not None
    for node in plan.nodes:
        words = docker_run_words(node)
        assert flag_values(words, "--log-driver") == ["json-file"]
        assert flag_values(words, "--log-opt") == ["max-size=50m", "max-file=5"]
        # the fabric probe's container is bounded the same way
        probe = [w for group in node.probe_run for w in group]
        assert flag_values(probe, "--log-opt") == ["max-size=50m", "max-file=5"]
    settings = {s.name: s for s in plan.settings}
    assert (settings["log_max_size"].value, settings["log_max_size"].source) == ("50m", "default")


def test_the_spec_overrides_the_bounds() -> None:
    spec = with_changes(example(SOLO), {"container.logs": {"max_size": "1g", "max_file": 2}})
    plan = compile_spec(spec).plan
    assert plan is not None
    assert flag_values(docker_run_words(plan.nodes[0]), "--log-opt") == ["max-size=1g", "max-file=2"]
    assert {s.name: s.source for s in plan.settings}["log_max_file"] == "spec"


@pytest.mark.parametrize(
    ("logs", "expected"),
    [
        ({"max_size": "0m"}, "must be a whole number with a unit k, m or g, as docker's json-file driver reads it"),
        ({"max_size": "10MiB"}, "must be a whole number with a unit k, m or g, as docker's json-file driver reads it"),
        ({"max_file": 0}, "container.logs.max_file:"),
        ({"max_lines": 3}, "container.logs"),
    ],
)
def test_bad_bounds_are_refused_with_the_fix(logs: dict[str, object], expected: str) -> None:
    result = compile_spec(with_changes(example(SOLO), {"container.logs": logs}))
    assert result.plan is None
    assert expected in diagnostics_text(result)


def fake_docker(fake: FakeCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"FAKE_STATE": str(fake.state), "PATH": os.environ["PATH"]}
    return subprocess.run([sys.executable, str(BIN / "docker"), *argv], env=env, capture_output=True, text=True)


def test_fake_docker_refuses_log_options_as_dockerd_does(fake: FakeCluster) -> None:
    fake.add_node("n", head=True)
    fake.add_image("n", "img")

    def run(name: str, *opts: str) -> subprocess.CompletedProcess[str]:
        return fake_docker(fake, "run", "-d", "--name", name, *opts, "img", "true")

    assert "max-file cannot be less than 1" in run("a", "--log-opt", "max-file=0").stderr
    assert "max-size must be a positive number" in run("b", "--log-opt", "max-size=0").stderr
    assert "unknown log opt 'max-lines'" in run("c", "--log-opt", "max-lines=3").stderr
    assert run("d", "--log-driver", "json-file", "--log-opt", "max-size=50m", "--log-opt", "max-file=5").returncode == 0
    shown = fake_docker(fake, "inspect", "--format", "{{json .HostConfig.LogConfig}}", "d").stdout
    assert json.loads(shown) == {"Type": "json-file", "Config": {"max-size": "50m", "max-file": "5"}}
    bad = fake_docker(fake, "logs", "--since", "yesterday", "d")
    assert bad.returncode == 1 and 'invalid value for "since"' in bad.stderr


def test_logs_since_and_follow_reach_docker(fake: FakeCluster, tmp_path: Path) -> None:
    fake.prepare("seed-qwen35-122b-2spark-ray.yaml")
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    head = fake.container("spark-a", "sparkc-qwen35-122b-spark-a")
    assert head is not None
    assert head["log_config"] == {"Type": "json-file", "Config": {"max-size": "50m", "max-file": "5"}}

    gathered = fake.run("logs.sh", "--since", "1h30m", "--out", str(tmp_path / "recent"))
    assert gathered.returncode == 0, gathered.stderr
    assert "ray start" in (tmp_path / "recent" / "spark-b.log").read_text()
    logs_calls = [argv for _, argv in fake.docker_calls() if argv[:1] == ["logs"]]
    assert ["logs", "--tail", "all", "--since", "1h30m", "sparkc-qwen35-122b-spark-b"] in logs_calls
    # a time after the last line: docker shows nothing
    later = fake.run("logs.sh", "--since", str(int(time.time()) + 3600), "--out", str(tmp_path / "later"))
    assert later.returncode == 0 and (tmp_path / "later" / "spark-a.log").read_text() == ""

    # docker logs -f ends when the followed container does
    assert fake_docker(fake, "stop", "sparkc-qwen35-122b-spark-a").returncode == 0
    followed = fake.run("logs.sh", "--since", "2026-12-01T00:00:00Z", "--follow", timeout=30)
    assert followed.returncode == 0 and "ray start" in followed.stdout, followed.stderr
    assert ["logs", "--follow", "--tail", "all", "--since", "2026-12-01T00:00:00Z", "sparkc-qwen35-122b-spark-a"] in [
        argv for _, argv in fake.docker_calls("spark-a")
    ]


@pytest.mark.parametrize("since", ["yesterday", "10 minutes", "$(touch /tmp/x)", "-5m", ""])
def test_a_bad_since_is_a_usage_error_before_any_node_is_asked(fake: FakeCluster, since: str) -> None:
    fake.prepare(SOLO)
    result = fake.run("logs.sh", "--since", since)
    assert result.returncode == 2
    assert "--since needs a duration (10m, 1h30m)" in result.stderr
    assert not fake.docker_calls()
