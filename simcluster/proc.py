"""Running commands with a hard timeout that also kills what they started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence


def run(
    argv: Sequence[str],
    *,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run, but on timeout the whole process group is killed.

    nsenter forks into the node's PID namespace and only its parent would get subprocess.run's
    kill, so the command gets its own process group and the group goes.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        process_group=0,
    )
    data = input.encode() if isinstance(input, str) else input
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, leader_last=True)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(list(argv), timeout, output=_dec(out), stderr=_dec(err)) from None
    result = subprocess.CompletedProcess(list(argv), proc.returncode, _dec(out), _dec(err))
    if check and result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, list(argv), result.stdout, result.stderr)
    return result


def kill_group(pgid: int, leader_last: bool = False) -> None:
    """SIGKILL a process group.

    With ``leader_last`` the members go first and the leader (nsenter) gets a moment to reap its
    child: if nsenter died first, its child in the node would be left a zombie of the host's init.
    """
    if leader_last:
        for pid in _group_members(pgid):
            if pid != pgid:
                _kill(pid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and pgid in _group_members(pgid):
            if _is_zombie(pgid):
                break
            time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stat_fields(pid: str) -> list[str]:
    # /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may contain spaces and parentheses.
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    return data[data.rindex(")") + 2 :].split()


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat_fields(entry)[2]) == pgid:
                    members.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return members


def _is_zombie(pid: int) -> bool:
    try:
        return _stat_fields(str(pid))[0] == "Z"
    except OSError:
        return True


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _dec(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")
