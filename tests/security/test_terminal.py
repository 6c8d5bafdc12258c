"""What a node sends back reaches the operator's terminal printable: fakes that answer as a hostile or broken
node would (nvidia-smi's process names, an image's env, docker's container list and labels) carry escape
sequences, OSC 52 (which writes the clipboard) among them; no generated script passes one through. And a
container's port label is a port, not a curl glob of a million URLs."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import with_changes

pytestmark = pytest.mark.security

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
CSI = "\x1b[2J\x1b[1;1H"
C1 = "\u009b2J"  # CSI as one C1 character
# What a terminal acts on: C0 controls but tab and newline, DEL, C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HELLOHAL = "hellohal2064/vllm-qwen3.5-gb10:latest"


def shown(done: object) -> str:
    return str(getattr(done, "stdout", "")) + str(getattr(done, "stderr", ""))


def test_nvidia_smi_process_names_reach_the_terminal_printable(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native.yaml")
    fake.set_gpus("spark-b", [f"NVIDIA GB10{CSI}"], [f"4242, miner{OSC52}{C1}\r"])
    done = fake.run("launch-cluster.sh", "--preflight-only")
    assert done.returncode == 1
    text = shown(done)
    assert "the GPU of spark-b is busy: 4242, miner?]52;" in text, text
    assert not CONTROL.search(text)


def test_an_images_env_reaches_the_terminal_printable(fake: FakeCluster) -> None:
    spec = fake.adapt("seed-qwen35-122b-2spark-ray.yaml")
    env = [f"PORT=8000{OSC52}", f"MODEL_PATH=/models/model{CSI}"]
    for node in ("spark-a", "spark-b"):
        fake.add_image(node, HELLOHAL, entrypoint=["/app/entrypoint.sh"], env=env)
    fake.compile(with_changes(spec, {"container.entrypoint": "keep"}))  # the entrypoint reads the image's env
    done = fake.run("launch-cluster.sh")
    assert done.returncode == 1 and "no longer matches profile" in done.stderr, shown(done)
    assert "image sets PORT=8000?]52;c;" in done.stderr and not CONTROL.search(shown(done))


def _container(fake: FakeCluster, node: str, name: str, labels: dict[str, str], status: str = "running") -> None:
    folder = fake.state / "nodes" / node / "containers" / name
    folder.mkdir(parents=True)
    meta = {"name": name, "id": "f" * 64, "labels": labels, "status": status, "env": {}, "words": []}
    (folder / "meta.json").write_text(json.dumps(meta))


@pytest.fixture
def curl_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A curl first on PATH that records its words, then does what curl does (the real one)."""
    real = next(Path(d) / "curl" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "curl").is_file())
    folder = tmp_path / "curl-bin"
    folder.mkdir()
    log = tmp_path / "curl.log"
    (folder / "curl").write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$*" >>{log}\nexec {real} "$@"\n')
    (folder / "curl").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def test_status_all_probes_only_a_port_and_prints_labels_printable(fake: FakeCluster, curl_log: Path) -> None:
    fake.prepare("solo-qwen3-32b.yaml")
    node = "spark-a"
    hostile = {
        "globbed": ("127.0.0.1", "8009/[1-1000000]"),
        "braced": ("127.0.0.{1,2,3}", "8009"),
        "digits": ("127.0.0.1", "٨٠٠٩"),
        "too-large": ("127.0.0.1", "80090"),
        "fine": ("127.0.0.1", "8009"),
    }
    for name, (host, port) in hostile.items():
        labels = {"sparkc.deployment": name, "sparkc.endpoint-host": host, "sparkc.api-port": port}
        _container(fake, node, f"sparkc-{name}-{node}", labels)
    _container(fake, node, "sparkc-x-spark-a", {"sparkc.deployment": f"x{OSC52}"}, status=f"running{CSI}")
    started = time.monotonic()
    done = fake.run("status.sh", "--all", timeout=15)
    assert time.monotonic() - started < 15
    assert done.returncode == 0, shown(done)
    assert not CONTROL.search(shown(done))
    calls = curl_log.read_text().splitlines() if curl_log.exists() else []
    assert [c for c in calls if "/health" in c] == [c for c in calls if "127.0.0.1:8009/health" in c]
    assert len([c for c in calls if "/health" in c]) == 1 and all(" -g" in f" {c}" or "-gfsS" in c for c in calls)
    rows = {line.split()[0]: line.split()[3] for line in done.stdout.splitlines()[1:]}
    assert rows["fine"] == "http://127.0.0.1:8009"
    assert {rows[name] for name in ("globbed", "braced", "digits", "too-large")} == {"?"}


def test_status_all_says_why_a_node_cannot_list_printable(fake: FakeCluster) -> None:
    spec = fake.prepare("solo-qwen3-32b.yaml")
    fake.compile(with_changes(spec, {}))
    fake.set("docker-down", "spark-a")
    done = fake.run("status.sh", "--all")
    assert done.returncode == 1 and "spark-a: cannot list its containers: Cannot connect" in done.stderr
