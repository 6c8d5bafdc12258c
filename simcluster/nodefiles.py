"""Files a cluster writes before its nodes start: ssh keys and configs, /etc/hosts, the GPU hook.

Host keys are as strict as on real Sparks: each node has its own (in its private /run), each node's
~/.ssh is its own (bind-mounted by nodeinit.sh), and the nodes' ssh client checks host keys as OpenSSH
does by default: known_hosts holds only what a test (as a user would) or sparkc's setup put there. The
harness's own ssh (SimCluster.ssh) reads a known_hosts of its own, written here with every node's key."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .hardware import FAKE_NVIDIA_SMI, HW_DIR
from .nodes import Node

HOST_KEY = "ssh_host_ed25519_key"  # in each node's own /run: a key per node, as real hosts have

_FAKE_NVIDIA_HOOK = """#!/usr/bin/env python3
# sparkc-sim: stands in for NVIDIA's OCI hook. dockerd only enables --gpus when a program of this
# name is on its PATH; runc feeds it the container state on stdin and needs exit 0. As the real hook
# makes the GPUs appear in the container's file system for every process in it (docker exec's too), this
# one writes the devices docker asked for into the container's /etc/sparkc-sim/gpus.
import json, os, sys
try:
    state = json.load(sys.stdin)
    with open(os.path.join(state["bundle"], "config.json")) as fh:
        config = json.load(fh)
    env = dict(e.split("=", 1) for e in config["process"]["env"] if "=" in e)
    devices = env.get("NVIDIA_VISIBLE_DEVICES", "")
    root = config["root"]["path"]
    root = root if os.path.isabs(root) else os.path.join(state["bundle"], root)
    if devices and devices not in ("void", "none"):
        os.makedirs(os.path.join(root, "etc/sparkc-sim"), exist_ok=True)
        with open(os.path.join(root, "etc/sparkc-sim/gpus"), "w") as fh:
            fh.write(devices + "\\n")
except Exception as exc:  # a stand-in must never stop a container the real hook would start
    print(f"sparkc-sim nvidia hook: {exc}", file=sys.stderr)
"""


# Every container of a node runs through this runtime: it adds the node's /proc/meminfo (hardware.py) as a
# read-only bind mount over the container's own, as LXCFS does (runc allows /proc/meminfo for that), then
# hands over to runc. An engine in the container reads the node's memory where the real one is.
_RUNTIME_WRAPPER = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
source = "{meminfo}"
for flag in ("--bundle", "-b"):
    if flag in args[:-1] and os.path.exists(source):
        config_path = os.path.join(args[args.index(flag) + 1], "config.json")
        with open(config_path) as fh:
            config = json.load(fh)
        mounts = config.setdefault("mounts", [])
        if not any(m.get("destination") == "/proc/meminfo" for m in mounts):
            mounts.append({{"destination": "/proc/meminfo", "type": "bind", "source": source,
                           "options": ["rbind", "ro"]}})
            with open(config_path, "w") as fh:
                json.dump(config, fh)
        break
os.execv("{runc}", ["runc", *args])
"""


def write_cluster_files(workdir: Path, ssh_key: Path, nodes: Sequence[Node], comment: str) -> None:
    ssh_dir = workdir / "ssh"
    bin_dir = workdir / "bin"
    for d in (ssh_dir, bin_dir, *(n.dir / "run" for n in nodes)):
        d.mkdir(parents=True, exist_ok=True)
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-C", comment, "-f", str(ssh_key)], check=True)
    harness_known = []
    for n in nodes:
        host_key = n.dir / "run" / HOST_KEY
        subprocess.run([*keygen, "-C", f"root@{n.name}", "-f", str(host_key)], check=True)
        public = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
        harness_known.append(f"{n.mgmt_ip},{n.name} {public}")
        (n.dir / "home-ssh").mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "known_hosts").write_text("\n".join(harness_known) + "\n")
    shutil.copy(ssh_key.with_suffix(".pub"), ssh_dir / "authorized_keys")
    (ssh_dir / "sshd_config").write_text(_sshd_config(ssh_dir))
    (ssh_dir / "ssh_config").write_text(_ssh_client_config(ssh_key))
    hook = bin_dir / "nvidia-container-runtime-hook"
    hook.write_text(_FAKE_NVIDIA_HOOK)
    hook.chmod(0o755)
    runc = shutil.which("runc") or "/usr/sbin/runc"
    wrapper = bin_dir / "sparkc-sim-runc"
    wrapper.write_text(_RUNTIME_WRAPPER.format(meminfo=f"{HW_DIR}/proc/meminfo", runc=runc))
    wrapper.chmod(0o755)
    # Bind-mounted over /usr/local/sbin (empty on the host) in every node: on the PATH of ssh sessions.
    sbin = workdir / "node-sbin"
    sbin.mkdir(exist_ok=True)
    (sbin / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (sbin / "nvidia-smi").chmod(0o755)
    for n in nodes:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{m.mgmt_ip}\t{m.name}" for m in nodes]
        (n.dir / "hosts").write_text("\n".join(lines) + "\n")


def _sshd_config(ssh_dir: Path) -> str:
    return f"""# sparkc-sim: one sshd per node, root by key only (the cluster's key, or one in the node's ~/.ssh).
Port 22
ListenAddress 0.0.0.0
HostKey /run/{HOST_KEY}
PidFile /run/sshd.pid
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile {ssh_dir}/authorized_keys .ssh/authorized_keys
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 64:30:128
MaxSessions 64
AcceptEnv LANG LC_*
SetEnv SPARKC_PREFLIGHT_ROOT={HW_DIR}
Subsystem sftp internal-sftp
"""


def _ssh_client_config(key: Path) -> str:
    return f"""# sparkc-sim: ssh client defaults inside the nodes (bind-mounted over /etc/ssh/ssh_config). Host keys
# are checked as OpenSSH's defaults check them, against the node's own ~/.ssh/known_hosts.
Host *
    IdentityFile {key}
    BatchMode yes
    LogLevel ERROR
    ConnectTimeout 10
"""


def cgroup_mounts() -> str:
    """The host's cgroup mounts as 'fstype subdir options' lines, for nodeinit.sh to repeat."""
    lines = []
    with open("/proc/self/mounts") as fh:
        for line in fh:
            _, mountpoint, fstype, options, *_ = line.split()
            if fstype in ("cgroup", "cgroup2") and mountpoint.startswith("/sys/fs/cgroup"):
                subdir = os.path.relpath(mountpoint, "/sys/fs/cgroup")
                lines.append(f"{fstype} {subdir} {options}")
    return "\n".join(lines)
