"""sparkc's specs on the simulated cluster: examples adapted through spec fields only, compiled, their
scripts run on the head node as an operator would run them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from simcluster import SimCluster, container_mounts
from tests.product import sparkc_compile
from tests.specs import DELETE, example, with_changes


def spec_ssh_options(cluster: SimCluster) -> list[str]:
    """The harness's ssh options a spec may carry: not BatchMode (sparkc's own), nor the harness's private
    known_hosts and checking: the scripts check host keys against the user's own known_hosts."""
    options = cluster.ssh_options
    skip = ("BatchMode", "StrictHostKeyChecking", "UserKnownHostsFile")
    return [options[i + 1] for i, o in enumerate(options) if o == "-o" and not options[i + 1].startswith(skip)]


def sim_spec(
    cluster: SimCluster,
    example_name: str,
    name: str,
    nodes: int,
    model_dir: Path,
    changes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An example, adapted to the simulated cluster through spec fields only; then `changes`."""
    return with_changes(
        example(example_name),
        {
            "name": name,
            "cluster.ssh": {
                "user": "root",
                "identity_file": str(cluster.ssh_key),
                "connect_timeout": 5,
                # The head's own ssh_config (the node's /etc/ssh/ssh_config) says the rest: a spec may not
                # name a known-hosts file or turn host-key checking down.
                "options": ["LogLevel=ERROR"],
            },
            # No RDMA device unless a test gives the nodes some (and then drops transport): NCCL over sockets,
            # which several nodes must say.
            "cluster.nodes": [
                {
                    "name": n.name,
                    "ssh": n.mgmt_ip,
                    "fabric": {"ip": n.fabric_ip, "netdev": n.fabric_netdev, "transport": "sockets"},
                }
                for n in cluster.nodes[:nodes]
            ],
            "container.secrets": DELETE,
            "container.shm_size": DELETE,
            "container.privileged": False,  # this machine cannot grant it (SIMCLUSTER.md)
            # limits this machine cannot grant (SIMCLUSTER.md): pinned memory, a million open files
            "container.ulimits": {"memlock": None, "nofile": None},
            "container.mounts": [{"host": h, "container": c, "readonly": True} for h, c in container_mounts()],
            "model.path": str(model_dir),
            "engine.tensor_parallel": nodes,
            "engine.max_model_len": 4096,
            "launch": {"timeout": 240, "ray_object_store_memory": 200_000_000},
            **(changes or {}),
        },
    )


class Deployment:
    """One compiled spec on the cluster: run its scripts on the head, look at its containers."""

    def __init__(self, cluster: SimCluster, spec: dict[str, Any], build: Path) -> None:
        self.cluster, self.spec, self.build = cluster, spec, build
        self.name = spec["name"]
        self.warnings = sparkc_compile(spec, build)  # the installed sparkc, as an operator runs it
        self.manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))

    @property
    def nodes(self) -> list[str]:
        return [n["name"] for n in self.spec["cluster"]["nodes"]]

    def run(
        self, script: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        start = time.monotonic()
        result = self.cluster.exec(
            self.cluster.head.name, ["bash", str(self.build / script), *args], timeout=timeout, env=env
        )
        result.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
        return result

    def container(self, node: str) -> str:
        return f"sparkc-{self.name}-{node}"

    def containers_on(self, node: str) -> list[str]:
        out = self.cluster.docker(
            node, "ps", "-a", "--filter", f"label=sparkc.deployment={self.name}", "--format", "{{.Names}}"
        ).stdout
        return out.split()

    def standin_env(self, node: str) -> dict[str, Any]:
        logs = self.cluster.docker(node, "logs", self.container(node)).stdout
        line = next(line for line in logs.splitlines() if line.startswith("SPARKC_STANDIN_ENV "))
        return json.loads(line.split(" ", 1)[1])

    def saved_logs(self) -> list[Path]:
        return sorted((self.build / "logs").iterdir()) if (self.build / "logs").exists() else []

    def remove(self) -> None:
        for node in self.nodes:
            for name in self.containers_on(node):
                self.cluster.docker(node, "rm", "-f", name, timeout=60)


Deploy = Callable[..., Deployment]  # the `deploy` fixture: (example, name, changes=None, nodes=2) -> Deployment
