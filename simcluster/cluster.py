"""The simulated cluster: N nodes on this machine, each a set of namespaces with its own sshd and dockerd.

    cluster = SimCluster(["spark1", "spark2", NodeSpec("spark3", fabric_netdev="enp1s0f0np0")]).up()
    cluster.exec("spark1", ["docker", "ps"])
    cluster.ssh("spark1", "spark2", "hostname")
    cluster.teardown()

Nodes see the machine's file system (so a build folder or model directory has the same path on
every node, as a shared file system would give) except /run, /etc/hosts and /etc/ssh/ssh_config,
which are per node. Needs root.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Self

from . import hardware, net, proc
from . import images as images_mod
from .cleanup import cleanup_stale, kill_pid
from .nodefiles import HOST_KEY, cgroup_mounts, write_cluster_files
from .nodes import (
    DEFAULT_NAME,
    NAME_RE,
    WORK_ROOT,
    ClusterUnavailable,
    Node,
    NodeSpec,
    validate_specs,
)
from .runtime import VENV, sync_runtime, venv_python

log = logging.getLogger("sparkc-sim")

NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How the fabric is cabled: "switch" puts every node's fabric port on one bridge; "mesh" (three nodes)
# and "ring" (three or more) cable each node's port 0 to the next node's port 1, the last to the first.
TOPOLOGIES = ("switch", "mesh", "ring")
PORT0, PORT1 = "enp1s0f0np0", "enp1s0f1np1"  # a CX-7 card's two ports
NODEINIT = Path(__file__).with_name("nodeinit.sh")


def preflight(venv: Path = VENV) -> list[str]:
    """What stops a cluster from starting here; empty when all is well."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root (namespaces, mounts and dockerd need root)")
    tools = (
        "ip",
        "unshare",
        "nsenter",
        "ss",
        "tar",
        "ssh",
        "ssh-keygen",
        "/usr/sbin/sshd",
        "dockerd",
        "docker",
        "debootstrap",
    )
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        problems.append(f"missing programs: {', '.join(missing)} (run: bash simcluster/install.sh)")
    if not venv_python(venv).exists():
        problems.append(f"no simulation venv at {venv} (run: bash simcluster/install.sh)")
    if os.geteuid() == 0 and shutil.which("ip"):
        probe = f"sparkc-sim-probe-{os.getpid()}"
        res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            problems.append(f"cannot create network namespaces: {res.stderr.strip()}")
        else:
            net.delete(probe)
    return problems


class PortBlocker:
    """A process listening on a TCP port of a node, until ``release()``."""

    def __init__(self, node: str, host: str, port: int, popen: subprocess.Popen[bytes]) -> None:
        self.node, self.host, self.port, self._popen = node, host, port, popen

    def release(self) -> None:
        if self._popen.poll() is None:
            proc.kill_group(self._popen.pid)
            self._popen.wait(timeout=10)


class SimCluster:
    def __init__(
        self,
        nodes: int | Sequence[str | NodeSpec] = 3,
        *,
        name: str = DEFAULT_NAME,
        work_root: Path = WORK_ROOT,
        mgmt_net: str = "10.77.0",
        fabric_net: str = "10.78.0",
        first_host: int = 11,
        venv: Path = VENV,
        topology: str = "switch",
        link_prefix_len: int = 24,
    ) -> None:
        if not NAME_RE.match(name):
            raise ValueError(f"cluster name {name!r} must match {NAME_RE.pattern}")
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology {topology!r} is none of {', '.join(TOPOLOGIES)}")
        specs = (
            [NodeSpec(f"spark{i + 1}") for i in range(nodes)]
            if isinstance(nodes, int)
            else [n if isinstance(n, NodeSpec) else NodeSpec(n) for n in nodes]
        )
        validate_specs(specs)
        if topology == "mesh" and len(specs) != 3:
            raise ValueError("a mesh without a switch is three nodes (a CX-7 card has two ports)")
        if topology == "ring" and len(specs) < 3:
            raise ValueError("a ring needs at least three nodes")
        if not 8 <= link_prefix_len <= 30:
            raise ValueError(f"link prefix length {link_prefix_len} is not between 8 and 30")
        self.topology, self.link_prefix_len = topology, link_prefix_len
        self.name = name
        self.work_root = Path(work_root)
        self.workdir = self.work_root / name
        self.venv = venv
        self.bridge_ns = f"{name}_net"
        cabled = topology != "switch"
        # Cable i joins node i's port 0 (.1) and node i+1's port 1 (.2) on its own subnet 10.78.<i+1>.0.
        link_net = fabric_net.rsplit(".", 1)[0]
        self.nodes = [
            Node(
                name=s.name,
                index=i,
                mgmt_ip=f"{mgmt_net}.{first_host + i}",
                fabric_ip=f"{link_net}.{i + 1}.1" if cabled else f"{fabric_net}.{first_host + i}",
                fabric_netdev=PORT0 if cabled else s.fabric_netdev,
                netns=f"{name}_{s.name}",
                dir=self.workdir / "nodes" / s.name,
            )
            for i, s in enumerate(specs)
        ]
        self.links = (
            [
                net.Link(
                    a.netns, PORT0, f"{link_net}.{i + 1}.1", b.netns, PORT1, f"{link_net}.{i + 1}.2", link_prefix_len
                )
                for i, (a, b) in enumerate(zip(self.nodes, self.nodes[1:] + self.nodes[:1], strict=True))
            ]
            if cabled
            else []
        )
        self.timings: dict[str, float] = {}
        self._popens: dict[str, subprocess.Popen[bytes]] = {}
        self._init_pids: dict[str, int] = {}
        self._blockers: list[PortBlocker] = []

    # ------------------------------------------------------------------ lookup

    def node(self, name: str | Node) -> Node:
        if isinstance(name, Node):
            return name
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in cluster {self.name} ({', '.join(n.name for n in self.nodes)})")

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    @property
    def hosts(self) -> dict[str, str]:
        """Node name -> management IP (also in each node's /etc/hosts)."""
        return {n.name: n.mgmt_ip for n in self.nodes}

    def ports(self, name: str | Node) -> dict[str, str]:
        """A node's fabric netdevs and their addresses: its cables' ends in a mesh or ring, else its one port."""
        n = self.node(name)
        if not self.links:
            return {n.fabric_netdev: n.fabric_ip}
        ends = [(c.a_netns, c.a_netdev, c.a_ip) for c in self.links]
        ends += [(c.b_netns, c.b_netdev, c.b_ip) for c in self.links]
        return {netdev: address for netns, netdev, address in sorted(ends) if netns == n.netns}

    @property
    def ssh_key(self) -> Path:
        return self.workdir / "ssh" / "id_ed25519"

    @property
    def ssh_options(self) -> list[str]:
        """Options the harness's own ssh uses: its private known_hosts (every node's key), checked."""
        return [
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.workdir / 'ssh' / 'known_hosts'}",
            "-o",
            "LogLevel=ERROR",
            "-o",
            f"IdentityFile={self.ssh_key}",
        ]

    def host_key(self, node: str | Node) -> str:
        """The node's ssh host key as `KEYTYPE BASE64`: what a user compares a fingerprint with."""
        public = (self.node(node).dir / "run" / HOST_KEY).with_suffix(".pub")
        return " ".join(public.read_text().split()[:2])

    def known_hosts(self, node: str | Node) -> Path:
        """The node's ~/.ssh/known_hosts (root's, in the node's own ~/.ssh), as seen from here."""
        return self.node(node).dir / "home-ssh" / "known_hosts"

    def record_host_keys(self, on: str | Node, names: Mapping[str, str] | None = None) -> None:
        """What a user does once per node: connect, compare the fingerprint, answer yes. Each node's key
        goes into `on`'s ~/.ssh/known_hosts under the name given (node -> name; default: every node by
        its management IP, the name the tests' specs give as ssh)."""
        names = names if names is not None else {n.name: n.mgmt_ip for n in self.nodes}
        with self.known_hosts(on).open("a") as known:
            for node, name in names.items():
                known.write(f"{name} {self.host_key(node)}\n")

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def up(self, images: Sequence[str] = images_mod.IMAGES) -> Self:
        """Creates networks and nodes, waits until sshd and dockerd answer, loads ``images``."""
        problems = preflight(self.venv)
        if problems:
            raise ClusterUnavailable("cannot create a simulated cluster here:\n  " + "\n  ".join(problems))
        start = time.monotonic()
        removed = cleanup_stale(self.name, self.work_root)
        if removed:
            log.warning("removed leftovers of an earlier run: %s", ", ".join(removed))
        try:
            write_cluster_files(self.workdir, self.ssh_key, self.nodes, comment=f"{self.name}-root")
            net.create(
                self.bridge_ns,
                [
                    net.Attachment(
                        n.netns, n.index, n.mgmt_ip, n.fabric_ip, n.fabric_netdev, bridged_fabric=not self.links
                    )
                    for n in self.nodes
                ],
                self.links,
            )
            for node in self.nodes:
                hardware.write_defaults(node)
                self._start_node(node)
            self._write_state()
            self._wait_ready(timeout=90.0)
            sync_runtime(self.venv)
            self.timings["up"] = time.monotonic() - start
            if images:
                t = time.monotonic()
                self.load_images(images)
                self.timings["load_images"] = time.monotonic() - t
        except BaseException:
            self.teardown()
            raise
        log.info(
            "cluster %s up in %.1f s: %s",
            self.name,
            time.monotonic() - start,
            ", ".join(f"{n.name}={n.mgmt_ip}/{n.fabric_ip}({n.fabric_netdev})" for n in self.nodes),
        )
        return self

    def teardown(self) -> None:
        """Removes everything ``up`` made; safe to call twice or after a failed ``up``."""
        start = time.monotonic()
        for blocker in self._blockers:
            blocker.release()
        self._blockers.clear()
        for node in self.nodes:
            pid = self._init_pids.get(node.name)
            if pid:
                kill_pid(pid)  # PID 1 of the node: the kernel kills everything else in it
        for popen in self._popens.values():
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("node launcher %d did not exit", popen.pid)
        self._popens.clear()
        self._init_pids.clear()
        cleanup_stale(self.name, self.work_root)
        self.timings["down"] = time.monotonic() - start

    @classmethod
    def attach(cls, name: str = DEFAULT_NAME, work_root: Path = WORK_ROOT) -> SimCluster:
        """The cluster a previous process started (by-hand CLI), from its state file."""
        state_path = Path(work_root) / name / "state.json"
        if not state_path.exists():
            raise ClusterUnavailable(f"no cluster {name!r} is up (no {state_path})")
        state = json.loads(state_path.read_text())
        cluster = cls(
            [NodeSpec(n["name"], n["fabric_netdev"]) for n in state["nodes"]],
            name=name,
            work_root=Path(work_root),
            venv=Path(state["venv"]),
            topology=state.get("topology", "switch"),
            link_prefix_len=state.get("link_prefix_len", 24),
        )
        cluster.nodes = [Node(**{**n, "dir": Path(n["dir"])}) for n in state["nodes"]]
        cluster._init_pids = {k: int(v) for k, v in state["init_pids"].items()}
        return cluster

    # ------------------------------------------------------------------ running things on nodes

    def exec(
        self,
        node: str | Node,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        check: bool = False,
        input: str | None = None,
        cwd: str = "/root",
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``argv`` inside every namespace of ``node``, with a login-like clean environment.

        A command that leaves a background process holding stdout open makes this wait for it:
        redirect the output of anything meant to outlive the call (``docker run -d`` is fine).
        """
        return proc.run(self._nsenter(node, argv, env, cwd), timeout=timeout, check=check, input=input)

    def sh(self, node: str | Node, script: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """``exec(node, ["bash", "-c", script])``."""
        return self.exec(node, ["bash", "-c", script], **kwargs)  # type: ignore[arg-type]

    def ssh(
        self,
        from_node: str | Node,
        to_node: str | Node,
        cmd: str | Sequence[str],
        *,
        timeout: float = 60.0,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """ssh from one node to another by management IP, as root with the cluster key."""
        remote = cmd if isinstance(cmd, str) else shlex.join(cmd)
        argv = ["ssh", *self.ssh_options, f"root@{self.node(to_node).mgmt_ip}", "--", remote]
        return self.exec(from_node, argv, timeout=timeout, check=check)

    def docker(
        self,
        node: str | Node,
        *args: str,
        timeout: float = 120.0,
        check: bool = False,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The docker client against ``node``'s dockerd."""
        argv = ["docker", "-H", self.node(node).docker_host, *args]
        return proc.run(argv, timeout=timeout, check=check, input=input)

    # ------------------------------------------------------------------ images

    def load_images(
        self, tags: Sequence[str] = images_mod.IMAGES, nodes: Sequence[str | Node] | None = None
    ) -> dict[str, str]:
        """Loads the test images into the nodes' dockerds (in parallel); returns tag -> image ID."""
        built = images_mod.ensure_images(self.venv, log=log.info)
        unknown = [t for t in tags if t not in built]
        if unknown:
            raise KeyError(f"unknown test image(s) {unknown}; known: {sorted(built)}")
        wanted = [built[t] for t in tags]
        targets = [self.node(n) for n in (nodes if nodes is not None else self.nodes)]
        errors: list[str] = []
        threads = [threading.Thread(target=self._load_into, args=(n, wanted, errors)) for n in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("docker load failed:\n" + "\n".join(errors))
        return {img.tag: img.id for img in wanted}

    def load_image(self, node: str | Node, name: str) -> str:
        return self.load_images([name], [node])[name]

    def image_id(self, node: str | Node, tag: str) -> str | None:
        res = self.docker(node, "image", "inspect", "-f", "{{.Id}}", tag, timeout=30)
        return res.stdout.strip() if res.returncode == 0 else None

    def _load_into(self, node: Node, wanted: list[images_mod.Image], errors: list[str]) -> None:
        try:
            self._docker_load(node, wanted)
            for img in wanted:
                got = self.image_id(node, img.tag)
                if got != img.id:
                    errors.append(f"{node.name}: {img.tag} is {got}, expected {img.id}")
        except Exception as exc:
            errors.append(f"{node.name}: {exc}")

    def _docker_load(self, node: Node, wanted: Sequence[images_mod.Image]) -> None:
        cmd = ["docker", "-H", node.docker_host, "load"]
        with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            assert p.stdin is not None
            try:
                images_mod.write_archive(p.stdin, wanted)
            except BrokenPipeError:
                pass  # docker load died early: its stderr below says why
            out, err = p.communicate(timeout=600)  # also closes stdin
        if p.returncode != 0:
            raise RuntimeError(f"docker load exited {p.returncode}: {err.decode(errors='replace').strip()}")
        log.debug("%s: %s", node.name, out.decode(errors="replace").strip())

    # ------------------------------------------------------------------ faults

    def break_sshd(self, node: str | Node) -> None:
        """Stops sshd on ``node`` (existing sessions stay); new ssh connections are refused."""
        self.exec(node, ["sh", "-c", "kill $(cat /run/sshd.pid)"], check=True)
        self._wait_port(self.node(node), 22, listening=False)

    def restore_sshd(self, node: str | Node) -> None:
        n = self.node(node)
        self.exec(
            n,
            [
                "/usr/sbin/sshd",
                "-f",
                str(self.workdir / "ssh" / "sshd_config"),
                "-E",
                str(n.dir / "sshd.log"),
            ],
            check=True,
        )
        self._wait_port(n, 22, listening=True)

    def break_remove_image(self, node: str | Node, tag: str = images_mod.VLLM_IMAGE) -> None:
        self.docker(node, "rmi", "-f", tag, check=True)

    def break_swap_image(
        self,
        node: str | Node,
        tag: str = images_mod.VLLM_IMAGE,
        marker: str = "rebuilt",
        files: dict[str, tuple[int, str]] | None = None,
    ) -> str:
        """Loads a different build under the same tag on ``node`` (with ``files`` replaced in it); returns its
        image ID. ``load_image`` puts the original back."""
        built = images_mod.ensure_images(self.venv, log=log.info)[tag]
        swapped = images_mod.swapped_image(built, marker, files)
        self._docker_load(self.node(node), [swapped])
        return swapped.id

    def break_occupy_port(self, node: str | Node, port: int, host: str = "0.0.0.0") -> PortBlocker:
        """Something else listens on ``host:port`` of ``node`` until the blocker is released."""
        code = (
            "import socket,sys,time\n"
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)\n"
            "print('listening', flush=True)\n"
            "while True: time.sleep(3600)\n"
        )
        argv = self._nsenter(node, [sys.executable, "-c", code, host, str(port)], None, "/")
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=0
        )
        assert popen.stdout is not None
        line = popen.stdout.readline().decode(errors="replace")
        if "listening" not in line:
            proc.kill_group(popen.pid)
            raise RuntimeError(f"could not occupy {host}:{port} on {self.node(node).name}: {line.strip()}")
        blocker = PortBlocker(self.node(node).name, host, port, popen)
        self._blockers.append(blocker)
        return blocker

    def set_gpus(self, node: str | Node, names: Sequence[str], processes: Sequence[str] = ()) -> None:
        """What the node's nvidia-smi lists (hardware.py); reset_hardware() restores one idle GB10."""
        hardware.set_gpus(self.node(node), names, processes)

    def set_hca(self, node: str | Node, name: str, state: str = "ACTIVE", ipv4: str | None = "") -> None:
        """An RDMA device on the node (hardware.py); also makes the node's /dev/infiniband."""
        hardware.set_hca(self.node(node), name, state, ipv4)

    def set_meminfo(
        self, node: str | Node, total_gb: float, free_gb: float, cached_gb: float, available_gb: float | None = None
    ) -> None:
        """The node's /proc/meminfo, for its preflight and its containers' engines (hardware.py);
        reset_hardware() restores a GB10's after boot."""
        hardware.set_meminfo(self.node(node), total_gb, free_gb, cached_gb, available_gb)

    def reset_hardware(self, node: str | Node) -> None:
        hardware.write_defaults(self.node(node))

    def break_fabric(self, node: str | Node) -> None:
        """Takes the node's fabric link down (cable pulled)."""
        n = self.node(node)
        net.set_link(n.netns, n.fabric_netdev, up=False)

    def restore_fabric(self, node: str | Node) -> None:
        n = self.node(node)
        net.set_link(n.netns, n.fabric_netdev, up=True)

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for n in self.nodes:
            pid = self._init_pids.get(n.name)
            alive = bool(pid) and Path(f"/proc/{pid}").exists()
            info: dict[str, object] = {
                "mgmt_ip": n.mgmt_ip,
                "fabric_ip": n.fabric_ip,
                "fabric_netdev": n.fabric_netdev,
                "alive": alive,
            }
            if alive:
                info["sshd"] = self._listening(n, 22)
                res = self.docker(n, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", timeout=20)
                info["docker"] = res.returncode == 0
                info["images"] = sorted(res.stdout.split()) if res.returncode == 0 else []
                ps = self.docker(n, "ps", "--format", "{{.Names}}", timeout=20)
                info["containers"] = sorted(ps.stdout.split()) if ps.returncode == 0 else []
            out[n.name] = info
        return out

    def logs(self, node: str | Node, tail: int = 40) -> str:
        """The last lines of the node's init, sshd and dockerd logs (for error messages)."""
        n = self.node(node)
        parts = []
        for fname in ("init.log", "sshd.log", "dockerd.log"):
            path = n.dir / fname
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                parts.append(f"--- {n.name}/{fname}\n" + "\n".join(lines))
        return "\n".join(parts)

    # ------------------------------------------------------------------ internals

    def _nsenter(self, node: str | Node, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str) -> list[str]:
        n = self.node(node)
        pid = self._init_pids.get(n.name)
        if not pid:
            raise ClusterUnavailable(f"node {n.name} is not running")
        full_env = {
            "PATH": NODE_PATH,
            "HOME": "/root",
            "USER": "root",
            "LOGNAME": "root",
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "SPARKC_PREFLIGHT_ROOT": hardware.HW_DIR,  # as sshd sets it (nodefiles.py)
            **(env or {}),
        }
        return [
            "nsenter",
            "-t",
            str(pid),
            "-m",
            "-u",
            "-i",
            "-n",
            "-p",
            f"--wd={cwd}",
            "--",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in full_env.items()),
            *argv,
        ]

    def _start_node(self, node: Node) -> None:
        env = {
            "PATH": NODE_PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "SIM_NODE_NAME": node.name,
            "SIM_NODE_DIR": str(node.dir),
            "SIM_CLUSTER_DIR": str(self.workdir),
            "SIM_CGROUP_MOUNTS": cgroup_mounts(),
            "SIM_PYTHON": sys.executable,
        }
        argv = [
            "ip",
            "netns",
            "exec",
            node.netns,
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--uts",
            "--ipc",
            "--",
            "bash",
            str(NODEINIT),
        ]
        with (node.dir / "init.log").open("ab") as logf:
            # Own session: a Ctrl-C meant for the test runner must not reach the nodes.
            popen = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._popens[node.name] = popen
        self._init_pids[node.name] = _child_pid(popen.pid, timeout=10.0)

    def _write_state(self) -> None:
        state = {
            "name": self.name,
            "venv": str(self.venv),
            "bridge_ns": self.bridge_ns,
            "topology": self.topology,
            "link_prefix_len": self.link_prefix_len,
            "nodes": [{**asdict(n), "dir": str(n.dir)} for n in self.nodes],
            "init_pids": self._init_pids,
            "ssh_key": str(self.ssh_key),
            "ssh_options": self.ssh_options,
        }
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2) + "\n")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = list(self.nodes)
        while pending:
            for n in list(pending):
                popen = self._popens.get(n.name)
                if popen is not None and popen.poll() is not None:
                    raise ClusterUnavailable(f"node {n.name} exited during start:\n{self.logs(n)}")
                if (
                    (n.dir / "run" / "sparkc-sim-init-done").exists()
                    and self._listening(n, 22)
                    and self.docker(n, "version", "--format", "{{.Server.Version}}", timeout=10).returncode == 0
                ):
                    pending.remove(n)
            if pending and time.monotonic() > deadline:
                details = "\n".join(self.logs(n) for n in pending)
                raise ClusterUnavailable(
                    f"nodes not ready after {timeout:.0f} s: {', '.join(n.name for n in pending)}\n{details}"
                )
            if pending:
                time.sleep(0.2)

    def _listening(self, node: Node, port: int) -> bool:
        res = subprocess.run(
            ["ip", "netns", "exec", node.netns, "ss", "-Hltn", f"sport = :{port}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return bool(res.stdout.strip())

    def _wait_port(self, node: Node, port: int, listening: bool, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self._listening(node, port) != listening:
            if time.monotonic() > deadline:
                state = "listen" if listening else "close"
                raise RuntimeError(f"port {port} on {node.name} did not {state} within {timeout:.0f} s")
            time.sleep(0.1)


# ---------------------------------------------------------------------- module helpers


def _child_pid(parent: int, timeout: float) -> int:
    """The one child of ``unshare --fork``: the node's PID 1, seen from the root namespace."""
    deadline = time.monotonic() + timeout
    path = Path(f"/proc/{parent}/task/{parent}/children")
    while time.monotonic() < deadline:
        try:
            children = path.read_text().split()
        except FileNotFoundError:
            raise ClusterUnavailable(f"node launcher {parent} exited at once") from None
        if children:
            return int(children[0])
        time.sleep(0.02)
    raise ClusterUnavailable(f"node launcher {parent} started no init within {timeout:.0f} s")
