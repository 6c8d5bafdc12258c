"""What the nodes' hardware looks like to sparkc's preflight and the engines: GPUs (a fake `nvidia-smi`), RDMA
devices (a fake sysfs tree) and memory (a /proc/meminfo). All live in the node's private /run, so each node has
its own.

The launcher's preflight reads RDMA devices from `$SPARKC_PREFLIGHT_ROOT/sys/class/infiniband` and
`$SPARKC_PREFLIGHT_ROOT/dev/infiniband`; every ssh session and `exec` on a node gets that variable
pointing at the node's tree (sshd's SetEnv), which is laid out as mlx5 lays out the real one.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from .nodes import Node

HW_DIR = "/run/sparkc-sim/hw"  # inside a node
DEFAULT_GPUS = ("NVIDIA GB10",)

# Answers the CSV queries the launcher and discover make, from the node's files, in nvidia-smi's format; with
# no GPU it says what the real one says, with its exit status.
FAKE_NVIDIA_SMI = f"""#!/bin/sh
# sparkc-sim: stands in for nvidia-smi; the GPUs and compute processes are {HW_DIR}/gpus and gpu-processes.
gpus={HW_DIR}/gpus
case " $* " in
  *" --format=csv,noheader "*) ;;
  *) echo "sparkc-sim nvidia-smi: only --format=csv,noheader queries are simulated" >&2; exit 2 ;;
esac
if [ ! -s "$gpus" ]; then
  echo "No devices were found"
  exit 6
fi
case " $* " in
  *" --query-gpu=name "*) cat "$gpus" ;;
  *" --query-gpu=index,name "*) awk '{{ print NR - 1 ", " $0 }}' "$gpus" ;;
  *" --query-compute-apps=pid,process_name "*) cat {HW_DIR}/gpu-processes 2>/dev/null || true ;;
  *" --query-compute-apps=pid "*) cut -d, -f1 {HW_DIR}/gpu-processes 2>/dev/null || true ;;
  *) echo "sparkc-sim nvidia-smi: query not simulated: $*" >&2; exit 2 ;;
esac
"""


def hw_dir(node: Node) -> Path:
    """The node's hardware files, as the host sees them (the node's /run is node.dir/run)."""
    return node.dir / "run" / "sparkc-sim" / "hw"


# A GB10's /proc/meminfo after boot, no engine running, in kB: MemTotal is the 121.69 GiB that `free` and CUDA
# report of a Spark's 128 GB; about 117 GiB available, little of it page cache.
GB10_MEMINFO_KB = {"MemTotal": 127_600_000, "MemFree": 121_000_000, "MemAvailable": 122_700_000, "Cached": 1_500_000}
# The fraction a test hands `vllm serve` on such a node, as sparkc writes it: vLLM's default 0.9 does not start
# there (its start check wants 0.9 of MemTotal free after its own init).
VLLM_FITS = ("--gpu-memory-utilization", "0.8")


def write_defaults(node: Node) -> None:
    """One idle GB10, no RDMA devices, a GB10's memory after boot."""
    d = hw_dir(node)
    for sub in ("sys", "dev"):
        shutil.rmtree(d / sub, ignore_errors=True)
    (d / "sys" / "class" / "infiniband").mkdir(parents=True)
    (d / "dev").mkdir()
    set_gpus(node, DEFAULT_GPUS)
    write_meminfo(node, GB10_MEMINFO_KB)


def set_gpus(node: Node, names: Sequence[str], processes: Sequence[str] = ()) -> None:
    """The GPUs nvidia-smi lists on the node; processes as 'PID, NAME' lines of compute apps."""
    d = hw_dir(node)
    d.mkdir(parents=True, exist_ok=True)
    (d / "gpus").write_text("".join(f"{n}\n" for n in names))
    (d / "gpu-processes").write_text("".join(f"{p}\n" for p in processes))


def set_hca(node: Node, name: str, state: str = "ACTIVE", ipv4: str | None = "", gid_index: int = 3) -> None:
    """An RDMA device with port 1 in `state` (ACTIVE, DOWN, ...). GIDs as on a ConnectX port: link-local
    at 0 (RoCE v1) and 1 (RoCE v2), the IPv4 address at gid_index - 1 (v1) and gid_index (v2); `ipv4`
    '' means the node's fabric IP, None no IPv4 GID. The first call also makes /dev/infiniband."""
    d = hw_dir(node)
    (d / "dev" / "infiniband").mkdir(parents=True, exist_ok=True)
    port = d / "sys" / "class" / "infiniband" / name / "ports" / "1"
    if port.parent.parent.exists():
        shutil.rmtree(port.parent.parent)
    (port / "gids").mkdir(parents=True)
    (port / "gid_attrs" / "types").mkdir(parents=True)
    codes = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
    (port / "state").write_text(f"{codes.get(state, 0)}: {state}\n")
    link_local = "fe80:0000:0000:0000:0000:0000:0000:0001"
    gids = {0: (link_local, "IB/RoCE v1"), 1: (link_local, "RoCE v2")}
    if ipv4 is not None:
        a, b, c, e = (int(x) for x in (ipv4 or node.fabric_ip).split("."))
        mapped = f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{e:02x}"
        gids[gid_index - 1] = (mapped, "IB/RoCE v1")
        gids[gid_index] = (mapped, "RoCE v2")
    for i in range(16):
        gid, kind = gids.get(i, ("0000:0000:0000:0000:0000:0000:0000:0000", ""))
        (port / "gids" / str(i)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(i)).write_text(kind + "\n" if kind else "")


def meminfo_path(node: Node) -> Path:
    """The node's /proc/meminfo as the host sees it. The node's init bind-mounts it over its /proc/meminfo
    and every container's gets it too (nodefiles.py: the runtime wrapper), so the launcher's preflight and the
    engine read the same file where the real one is. Written in place: a new file would leave the mounts on
    the old one."""
    return hw_dir(node) / "proc" / "meminfo"


def write_meminfo(node: Node, kb: dict[str, int]) -> None:
    path = meminfo_path(node)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "r+" if path.exists() else "w") as fh:
        fh.write("".join(f"{name}:{value:>16} kB\n" for name, value in kb.items()))
        fh.truncate()


def set_meminfo(
    node: Node, total_gb: float, free_gb: float, cached_gb: float, available_gb: float | None = None
) -> None:
    """What the node's /proc/meminfo says (GiB). MemAvailable: free plus cache, as the kernel roughly counts
    it, unless given. write_defaults restores a GB10's after boot."""
    kb = 1024 * 1024
    available = free_gb + cached_gb if available_gb is None else available_gb
    fields = {"MemTotal": total_gb, "MemFree": free_gb, "MemAvailable": available, "Buffers": 0, "Cached": cached_gb}
    write_meminfo(node, {name: int(value * kb) for name, value in fields.items()})


def remove_hca(node: Node, name: str) -> None:
    shutil.rmtree(hw_dir(node) / "sys" / "class" / "infiniband" / name, ignore_errors=True)


def remove_dev_infiniband(node: Node) -> None:
    shutil.rmtree(hw_dir(node) / "dev" / "infiniband", ignore_errors=True)
