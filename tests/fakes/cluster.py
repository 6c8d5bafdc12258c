"""A fake cluster on PATH: `ssh`, `docker` (and real curl, real sockets) for running generated scripts."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from compiler.emit import emit
from compiler.pipeline import CompileResult, compile_text

BIN = Path(__file__).resolve().parent / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.build = root / "build"
        for sub in ("targets", "unreachable", "behaviour", "nodes"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        (self.state / "calls.log").touch()

    def add_node(self, name: str, target: str = "", head: bool = False) -> None:
        (self.state / "nodes" / name / "containers").mkdir(parents=True, exist_ok=True)
        (self.state / "nodes" / name / "images").mkdir(parents=True, exist_ok=True)
        if target:
            (self.state / "targets" / target).write_text(name)
        if head:
            (self.state / "head").write_text(name)

    def add_image(self, node: str, ref: str, image_id: str = "sha256:" + "a" * 64, entrypoint: list[str] | None = None,
                  env: list[str] | None = None, ray: bool = True) -> None:
        d = self.state / "nodes" / node / "images" / ref.replace("/", "_").replace(":", "@")
        d.mkdir(parents=True, exist_ok=True)
        (d / "meta.json").write_text(json.dumps({"id": image_id, "entrypoint": entrypoint, "env": env or [],
                                                 "ray": ray}))

    def add_netdev(self, node: str, name: str, ip: str, mtu: int = 9000) -> None:
        path = self.state / "nodes" / node / "netdevs.json"
        netdevs = json.loads(path.read_text()) if path.exists() else {}
        netdevs[name] = {"ip": ip, "mtu": mtu}
        path.write_text(json.dumps(netdevs))

    def set(self, behaviour: str, node: str = "") -> None:
        (self.state / "behaviour" / (f"{node}.{behaviour}" if node else behaviour)).touch()

    def unreachable(self, node: str) -> None:
        (self.state / "unreachable" / node).touch()

    def compile(self, spec: dict[str, Any]) -> CompileResult:
        import io

        buf = io.StringIO()
        YAML().dump(spec, buf)
        result = compile_text(buf.getvalue(), "spec.yaml")
        assert result.ok, result.diagnostics
        emit(result.files, self.build)
        return result

    def run(self, script: str, *args: str, env: dict[str, str] | None = None,
            timeout: int = 90) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", FAKE_STATE=str(self.state), **(env or {}))
        full_env.pop("FAKE_NODE", None)
        return subprocess.run(["bash", str(self.build / script), *args], env=full_env, capture_output=True,
                              text=True, timeout=timeout)

    def calls(self) -> list[str]:
        return (self.state / "calls.log").read_text().splitlines()

    def container(self, node: str, name: str) -> dict[str, Any] | None:
        path = self.state / "nodes" / node / "containers" / name / "meta.json"
        return json.loads(path.read_text()) if path.exists() else None

    def containers(self, node: str) -> list[str]:
        return sorted(p.name for p in (self.state / "nodes" / node / "containers").iterdir())

    def shutdown(self) -> None:
        for pids in self.state.glob("nodes/*/containers/*/pids"):
            for pid in pids.read_text().split():
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
