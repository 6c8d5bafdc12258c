"""No secret on a command line: any user of the head reads every process's argv in /proc/PID/cmdline.
bench.sh runs on the fakes with every program it may start wrapped by a recorder (which runs the real
program after noting its argv); no argv holds the API key, and the key still reaches the benchmark byte
for byte (the stand-in engine answers 401 to any other)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.fakes.cluster import BIN, FakeCluster
from tests.specs import with_changes

pytestmark = pytest.mark.security

# Programs bench.sh and what it starts may run, besides the fakes (which record their own argv).
RECORDED = ("env", "timeout", "python3", "cat", "mkdir", "mktemp", "mv", "rm", "date", "id", "tail", "curl", "sed")
# Bytes a shell would read as syntax, or split on: an API key is any printable text.
KEYS = ["sk-plain", "sk-'q'\"d\"$(id)`id`;a|b&c<d>e*?[x] ~\\ end", "-e KEY=x --env-file=/etc/passwd"]


def recorders(folder: Path, log: Path) -> str:
    """A PATH folder of wrappers that append their argv (NUL-separated) to `log` and run the real program."""
    folder.mkdir()
    for name in RECORDED:
        real = shutil.which(name)
        if real is None:
            continue
        wrapper = folder / name
        wrapper.write_text(f"#!/bin/bash\nprintf '%s\\0' {name} \"$@\" >>'{log}'\nexec '{real}' \"$@\"\n")
        wrapper.chmod(0o755)
    return f"{folder}:{BIN}:{os.environ['PATH']}"


@pytest.mark.parametrize("key", KEYS, ids=["plain", "shell_syntax", "flags"])
def test_bench_passes_the_api_key_by_name_only(fake: FakeCluster, tmp_path: Path, key: str) -> None:
    fake.compile(with_changes(fake.adapt("solo-qwen3-32b-api-key.yaml"), {"container.secrets": ["VLLM_API_KEY"]}))
    launch = fake.run("launch-cluster.sh", "--no-probe", env={"VLLM_API_KEY": key})
    assert launch.returncode == 0, launch.stdout + launch.stderr
    log = tmp_path / "argv.log"
    path = recorders(tmp_path / "recorders", log)
    bench = fake.run("bench.sh", "--concurrency", "1", "--prompts", "2", env={"VLLM_API_KEY": key, "PATH": path})
    assert bench.returncode == 0, bench.stdout + bench.stderr  # the stand-in took the key as it was given
    argv = log.read_bytes()
    assert b"timeout\0" in argv  # the recorders did record
    assert key.encode() not in argv
    assert not any(key in word for _, argv in fake.docker_calls() for word in argv)
    assert not any(key in word for argv in fake.ssh_calls() for word in argv)
