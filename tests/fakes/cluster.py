"""A fake cluster on PATH: `ssh`, `docker` (and real curl, real sockets) for running generated scripts."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compiler.pipeline import CompileResult
from tests.specs import DELETE, compile_into, example, with_changes

BIN = Path(__file__).resolve().parent / "bin"

# A Spark's /proc/meminfo after boot, no engine running, in kB: MemTotal is the 121.69 GiB that `free` and
# CUDA report of its 128 GB; about 117 GiB available, little of it page cache.
GB10_MEMINFO_KB = {"MemTotal": 127_600_000, "MemFree": 121_000_000, "MemAvailable": 122_700_000, "Cached": 1_500_000}

# The entrypoint each image family bakes in, as the fake images report it to `docker image inspect`.
ENTRYPOINTS = {
    "hellohal2064/": ["/app/entrypoint.sh"],
    "vllm/vllm-openai": ["vllm", "serve"],
    "nvcr.io/nvidia/vllm": ["/opt/nvidia/nvidia_entrypoint.sh"],
}


def image_entrypoint(image: str) -> list[str] | None:
    return next((entry for prefix, entry in ENTRYPOINTS.items() if image.startswith(prefix)), None)


def host_key(node: str) -> str:
    """A fake node's ssh host key as `KEYTYPE BASE64`, as tests/fakes/bin/ssh presents it."""
    digest = hashlib.sha256(f"sparkc fake host key {node}".encode()).digest()
    return "ssh-ed25519 " + base64.b64encode(digest).decode()


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

    def add_node(self, name: str, target: str = "", head: bool = False, known: bool = True) -> None:
        """A node, reached over ssh at `target` (user@host). `known`: its host key is in the fake's
        known_hosts under that host, as after the user's first, checked connection to it."""
        (self.state / "nodes" / name / "containers").mkdir(parents=True, exist_ok=True)
        (self.state / "nodes" / name / "images").mkdir(parents=True, exist_ok=True)
        if not (self.state / "nodes" / name / "root" / "proc" / "meminfo").exists():
            self.set_meminfo(name)
        if target:
            (self.state / "targets" / target).write_text(name)
            if known:
                self.know_host(name, target.rsplit("@", 1)[-1])
        if head:
            (self.state / "head").write_text(name)

    def know_host(self, node: str, name: str) -> None:
        """`node`'s host key recorded under `name` in the known_hosts the fake ssh reads by default."""
        with (self.state / "known_hosts").open("a") as known:
            known.write(f"{name.lower()} {host_key(node)}\n")

    def add_image(
        self,
        node: str,
        ref: str,
        image_id: str = "sha256:" + "a" * 64,
        entrypoint: list[str] | None = None,
        env: list[str] | None = None,
        ray: bool = True,
    ) -> None:
        d = self.state / "nodes" / node / "images" / ref.replace("/", "_").replace(":", "@")
        d.mkdir(parents=True, exist_ok=True)
        (d / "meta.json").write_text(
            json.dumps({"id": image_id, "entrypoint": entrypoint, "env": env or [], "ray": ray})
        )

    def add_netdev(self, node: str, name: str, ip: str, mtu: int = 9000) -> None:
        path = self.state / "nodes" / node / "netdevs.json"
        netdevs = json.loads(path.read_text()) if path.exists() else {}
        netdevs[name] = {"ip": ip, "mtu": mtu}
        path.write_text(json.dumps(netdevs))

    def add_hca(
        self, node: str, name: str, state: str = "4: ACTIVE", ipv4_gid: str = "0a4e:000b", index: int = 3
    ) -> None:
        """An RDMA device in the node's fake sysfs, as mlx5 lays it out: port 1's state, a link-local GID
        at 0 and 1, and the IPv4 one (RoCE v1 at index - 1, RoCE v2 at index); '' for no IPv4 GID."""
        root = self.state / "nodes" / node / "root"
        (root / "dev" / "infiniband").mkdir(parents=True, exist_ok=True)
        port = root / "sys" / "class" / "infiniband" / name / "ports" / "1"
        for sub in ("gids", "gid_attrs/types"):
            (port / sub).mkdir(parents=True, exist_ok=True)
        (port / "state").write_text(state + "\n")
        gids = {0: ("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"),
                1: ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2")}  # fmt: skip
        if ipv4_gid:
            gids[index - 1] = (f"0000:0000:0000:0000:0000:ffff:{ipv4_gid}", "IB/RoCE v1")
            gids[index] = (f"0000:0000:0000:0000:0000:ffff:{ipv4_gid}", "RoCE v2")
        for i in range(8):
            gid, kind = gids.get(i, ("0000:0000:0000:0000:0000:0000:0000:0000", ""))
            (port / "gids" / str(i)).write_text(gid + "\n")
            (port / "gid_attrs" / "types" / str(i)).write_text(kind + "\n" if kind else "")

    def set_meminfo(self, node: str, **kb: int) -> None:
        """The node's /proc/meminfo (preflight reads it under SPARKC_PREFLIGHT_ROOT): a GB10's after boot, with
        the fields given (in kB) instead."""
        fields = {**GB10_MEMINFO_KB, **kb}
        proc = self.state / "nodes" / node / "root" / "proc"
        proc.mkdir(parents=True, exist_ok=True)
        (proc / "meminfo").write_text("".join(f"{key}:{value:>16} kB\n" for key, value in fields.items()))

    def set_gpus(self, node: str, gpus: list[str], processes: list[str] | None = None) -> None:
        (self.state / "nodes" / node / "gpus.json").write_text(json.dumps({"gpus": gpus, "processes": processes or []}))

    def set(self, behaviour: str, node: str = "") -> None:
        (self.state / "behaviour" / (f"{node}.{behaviour}" if node else behaviour)).touch()

    def unreachable(self, node: str) -> None:
        (self.state / "unreachable" / node).touch()

    def login_shell(self, node: str, *shell: str) -> None:
        """The node's user logs in with this shell (`dash`, `zsh`, `busybox sh`): ssh runs commands with it."""
        (self.state / "shells").mkdir(exist_ok=True)
        (self.state / "shells" / node).write_text(" ".join(shell))

    def set_home(self, node: str, home: Path) -> None:
        """The home of the node's ssh user: the fake ssh starts the login shell there, HOME set to it."""
        home.mkdir(parents=True, exist_ok=True)
        (self.state / "homes").mkdir(exist_ok=True)
        (self.state / "homes" / node).write_text(str(home))

    def adapt(self, spec: Mapping[str, Any] | str) -> dict[str, Any]:
        """A spec (or an example, by name) made runnable on the fakes: a local model folder, loopback fabric
        addresses, free ports, no secrets; its nodes, their netdevs and its image are registered here."""
        spec = example(spec) if isinstance(spec, str) else spec
        model = self.root / "models" / "m"
        model.mkdir(parents=True, exist_ok=True)
        nodes = range(len(spec["cluster"]["nodes"]))
        spec = with_changes(
            spec,
            {
                "model.path": str(model),
                "engine.port": free_port(),
                "launch.ray_port": free_port(),
                "launch.master_port": free_port(),
                "launch.timeout": 120,
                "container.secrets": DELETE,
                **{f"cluster.nodes.{i}.fabric.ip": f"127.0.0.{i + 1}" for i in nodes if _cabled(spec, i)},
            },
        )
        # Mount sources as local folders: preflight checks that each exists (the fake nodes share this disk).
        mounts = []
        for i, mount in enumerate(spec["container"].get("mounts", [])):
            source = self.root / "mounts" / str(i)
            source.mkdir(parents=True, exist_ok=True)
            mounts.append({**mount, "host": str(source)})
        if mounts:
            spec = with_changes(spec, {"container.mounts": mounts})
        user = (spec["cluster"].get("ssh") or {}).get("user")
        image = spec["container"]["image"]
        for i, node in enumerate(spec["cluster"]["nodes"]):
            target = "" if i == 0 else f"{user}@{node['ssh']}" if user else node["ssh"]
            self.add_node(node["name"], target, head=i == 0)
            if "fabric" in node:  # one node alone may have none
                self.add_netdev(node["name"], node["fabric"]["netdev"], node["fabric"]["ip"])
            self.add_image(node["name"], image, entrypoint=image_entrypoint(image))
            for hca in node.get("fabric", {}).get("hcas", []):
                self.add_hca(node["name"], hca.lstrip("=").split(":")[0])
        return spec

    def compile(self, spec: Mapping[str, Any]) -> CompileResult:
        """Compile the spec into this cluster's build folder, where run() finds the scripts."""
        return compile_into(spec, self.build)

    def prepare(self, name: str) -> dict[str, Any]:
        """An example adapted to the fakes and compiled; returns the spec as compiled."""
        spec = self.adapt(name)
        self.compile(spec)
        return spec

    def run(
        self, script: str, *args: str, env: dict[str, str] | None = None, timeout: int = 90
    ) -> subprocess.CompletedProcess[str]:
        head = (self.state / "head").read_text().strip()
        full_env = {
            **os.environ,
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "FAKE_STATE": str(self.state),
            "SPARKC_PREFLIGHT_ROOT": str(self.state / "nodes" / head / "root"),
            **(env or {}),  # a PATH here replaces the one above: it must hold BIN first too
        }
        full_env.pop("FAKE_NODE", None)
        return subprocess.run(
            ["bash", str(self.build / script), *args], env=full_env, capture_output=True, text=True, timeout=timeout
        )

    def calls(self) -> list[str]:
        """Every call to a fake, in order: `ssh TARGET WORDS`, `ip[NODE] ARGS`, `docker[NODE] ["ARG", ...]`."""
        return (self.state / "calls.log").read_text().splitlines()

    def docker_calls(self, node: str = "") -> list[tuple[str, list[str]]]:
        """Each docker call, in order, as (node, argv exactly as docker received it); only `node`'s if given."""
        found = []
        for line in self.calls():
            if line.startswith("docker["):
                tag, argv = line.split(" ", 1)
                if not node or tag == f"docker[{node}]":
                    found.append((tag[len("docker[") : -1], json.loads(argv)))
        return found

    @staticmethod
    def is_probe(argv: list[str]) -> bool:
        """Whether a `docker run` argv starts the fabric probe's container (its name ends in -probe)."""
        return "--name" in argv and argv[argv.index("--name") + 1].endswith("-probe")

    def ssh_calls(self) -> list[list[str]]:
        """Each ssh call's argv, exactly as ssh received it."""
        path = self.state / "ssh.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def container(self, node: str, name: str) -> dict[str, Any] | None:
        path = self.state / "nodes" / node / "containers" / name / "meta.json"
        return json.loads(path.read_text()) if path.exists() else None

    def containers(self, node: str) -> list[str]:
        return sorted(p.name for p in (self.state / "nodes" / node / "containers").iterdir())

    def shutdown(self) -> None:
        for pids in self.state.glob("nodes/*/containers/*/pids"):
            for pid in pids.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(pid), signal.SIGKILL)


def _cabled(spec: Mapping[str, Any], index: int) -> bool:
    return "fabric" in spec["cluster"]["nodes"][index]
