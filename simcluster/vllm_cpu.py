"""Real vLLM on CPU for the simulated cluster: where install_vllm.sh put it and how to run it.

vLLM's CPU build serves a tiny model (tinymodel.py) on one node, or across nodes in its own
multi-node mode (`--nnodes`, `--headless`; tensor parallel over Gloo); it refuses the Ray executor.
Containers get it like the rest of the Python runtime: the venv and the interpreter it was made
from, bind-mounted read-only at the same paths (``vllm_mounts``).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import platform
import subprocess
from functools import cache
from pathlib import Path

SIM_ROOT = Path(os.environ.get("SPARKC_SIM_ROOT", "/opt/sparkc-sim"))
VLLM_VENV = Path(os.environ.get("SPARKC_SIM_VLLM_VENV", str(SIM_ROOT / "vllm-venv")))
CACHE = Path(os.environ.get("SPARKC_SIM_CACHE", "/var/cache/sparkc-sim"))
TINY_MODEL_DIR = CACHE / "tiny-llama"
INSTALL_SCRIPT = Path(__file__).resolve().parent / "install_vllm.sh"
MARKER_NAME = ".sparkc-sim-vllm"  # written by install_vllm.sh once everything is installed and fixed

# Measured on a 2-core, 24 GB VM with vllm_env(): /health after ~22-37 s (eager; ~50 s when vLLM
# compiles), ~2.9 GB RSS for the server and its engine process.
STARTUP_TIMEOUT_S = 240.0


def vllm_python(venv: Path = VLLM_VENV) -> Path:
    return venv / "bin" / "python3"


def vllm_bin(venv: Path = VLLM_VENV) -> Path:
    return venv / "bin" / "vllm"


def vllm_env(kv_cache_gb: int = 1) -> dict[str, str]:
    """Environment variables vLLM needs on CPU, to add to (not replace) a process's environment."""
    return {
        # Selects the CPU platform before any accelerator plugin is probed. Reported without it: the
        # AVX-512 build loaded and died of SIGILL, with no log, on AVX2-only CPUs.
        "VLLM_TARGET_DEVICE": "cpu",
        # The compiler's command lines have no --enforce-eager, and vLLM on CPU then compiles the
        # model with torch inductor, which needs a C++ compiler the test images lack
        # ("InvalidCxxCompiler"). Dynamo off makes that a plain eager run; vLLM's AOT compile
        # path must be off too, or it fails with "aot_compile is not supported".
        "TORCHDYNAMO_DISABLE": "1",
        "VLLM_USE_AOT_COMPILE": "0",
        # GiB of RAM for the KV cache; unset, vLLM reserves 4 GiB per server, too much when several
        # simulated nodes share one machine.
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
        # The tiny model is a local directory; there is no hub to reach.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


@cache
def _interpreter_info(venv: Path) -> dict[str, str]:
    """Where the venv's base interpreter keeps its files, asked of the interpreter itself."""
    code = (
        "import json, sys, sysconfig\n"
        "print(json.dumps({'base_prefix': sys.base_prefix,\n"
        "                  'stdlib': sysconfig.get_paths()['stdlib'],\n"
        "                  'platstdlib': sysconfig.get_paths()['platstdlib']}))\n"
    )
    out = subprocess.run([str(vllm_python(venv)), "-I", "-c", code], check=True, capture_output=True, text=True)
    info: dict[str, str] = json.loads(out.stdout)
    return info


# glibc's own libraries: the image must provide these (a host copy would not match its loader).
_GLIBC_SONAMES = ("ld-linux", "libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "libutil.so", "linux-vdso")


@cache
def _interpreter_libs(binary: Path) -> tuple[Path, ...]:
    """Shared libraries the interpreter binary itself needs beyond glibc, as the loader finds them
    (soname paths, not their link targets). Debian's python3.11 needs libexpat.so.1, which a
    minbase image lacks: without it the container's python does not even start."""
    out = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True).stdout
    libs: list[Path] = []
    for line in out.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if not arrow or not rest.startswith("/") or name.startswith(_GLIBC_SONAMES):
            continue
        lib = Path(rest.split(" (", 1)[0])
        # /lib is a link to /usr/lib on Debian 12: name the real directory, so the mount target
        # does not depend on the image having the same link.
        libs.append(Path(os.path.realpath(lib.parent)) / lib.name)
    return tuple(libs)


def _symlink_chain(path: Path) -> list[Path]:
    """``path`` and every path its symlinks pass through, links not collapsed (each may be needed)."""
    chain = [path]
    seen = {path}
    while path.is_symlink():
        path = Path(os.path.normpath(path.parent / os.readlink(path)))
        if path in seen:
            raise RuntimeError(f"symlink loop at {path}")
        seen.add(path)
        chain.append(path)
    return chain


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def vllm_mounts(venv: Path = VLLM_VENV) -> list[tuple[str, str]]:
    """(host path, container path) pairs to bind-mount read-only so ``<venv>/bin/vllm`` runs in a
    container whose image has no Python (but has glibc and libnuma1).

    Same path on both sides: the venv's scripts and pyvenv.cfg name absolute paths. A distribution
    interpreter (/usr, /usr/local) contributes only its own files, never the image's whole /usr.
    """
    venv = venv.absolute()
    info = _interpreter_info(venv)
    base = Path(info["base_prefix"])
    whole_prefix = str(base) not in ("/usr", "/usr/local")
    mounts: list[Path] = [venv]
    if whole_prefix:
        mounts.append(base)  # e.g. /opt/python3.11 or a pyenv version: binary, stdlib, libpython
    extra = [*_symlink_chain(vllm_python(venv))[1:], Path(info["stdlib"]), Path(info["platstdlib"])]
    # Its libraries beyond glibc, libpython included when it is a shared build outside the prefix.
    extra += _interpreter_libs(Path(os.path.realpath(vllm_python(venv))))
    for path in extra:
        if not any(_inside(path, m) for m in mounts):
            mounts.append(path)
    return [(str(p), str(p)) for p in mounts]


def vllm_available(venv: Path = VLLM_VENV) -> bool:
    """True when install_vllm.sh has finished here and this machine can run vLLM's CPU build.

    Cheap (no import of vllm, which takes seconds): checks the install marker, the entry point,
    the interpreter the venv points at, the CPU architecture and libnuma.
    """
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        if not (venv / MARKER_NAME).read_text().startswith("vllm-cpu="):
            return False
    except OSError:
        return False
    python = vllm_python(venv)
    if not os.access(vllm_bin(venv), os.X_OK) or not python.exists():  # exists() follows the links
        return False
    return ctypes.util.find_library("numa") is not None
