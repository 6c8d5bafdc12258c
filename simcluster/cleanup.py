"""Removing a cluster, including what a crashed or killed run left behind."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

from . import net
from .nodes import DEFAULT_NAME, WORK_ROOT

log = logging.getLogger("sparkc-sim")


def cleanup_stale(name: str = DEFAULT_NAME, work_root: Path = WORK_ROOT) -> list[str]:
    """Removes what a crashed run of cluster ``name`` left: its processes, namespaces, mounts, files."""
    removed = []
    prefix = f"{name}_"  # cluster names cannot contain "_", so other clusters never match
    for ns in net.list_netns():
        if ns.startswith(prefix):
            net.kill_netns_processes(ns)
            net.delete(ns)
            removed.append(f"netns {ns}")
    workdir = Path(work_root) / name
    if workdir.exists():
        unmount_under(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
        if workdir.exists():
            log.warning("could not remove %s completely", workdir)
        removed.append(str(workdir))
    return removed


def kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def unmount_under(path: Path) -> None:
    # Mounts are made inside the nodes' private mount namespaces, so none should be visible here;
    # if one leaked anyway, rmtree must not walk into it.
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
