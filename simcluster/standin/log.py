"""Output in the shape the tests read: vLLM-like log lines and machine-readable marker lines."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

ENV_MARKER = "SPARKC_STANDIN_ENV"


def log(level: str, msg: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{level} {stamp} [sparkc-standin] {msg}", flush=True)


def info(msg: str) -> None:
    log("INFO", msg)


def warning(msg: str) -> None:
    log("WARNING", msg)


def error(msg: str) -> None:
    log("ERROR", msg)


def marker(name: str, payload: dict[str, Any]) -> None:
    """One line ``NAME {json}`` on stdout, for tests that grep ``docker logs``."""
    print(f"{name} {json.dumps(payload, sort_keys=True)}", flush=True)


START_FILES = "/tmp/sparkc-standin-start-"  # + pid + .json: what announce_start printed, whole


def announce_start(engine: str, argv: list[str]) -> None:
    # Printed before parsing, so even a run that dies on a bad flag shows what it was given.
    payload = {
        "engine": engine,
        "argv": argv,
        "sys_argv": sys.argv,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "env": dict(os.environ),
    }
    marker(ENV_MARKER, payload)
    # The same in a file of the process's own container: under mpirun the line goes through mpirun's output
    # forwarding, which cuts lines longer than a pipe's atomic write (4 KiB) and interleaves the ranks' pieces.
    try:
        with open(f"{START_FILES}{os.getpid()}.json", "w", encoding="utf-8") as out:
            out.write(json.dumps(payload, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only /tmp: the line above is still there
