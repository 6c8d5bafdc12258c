"""The host-side Python runtime the containers borrow: a venv plus the interpreter it was made from.

Neither Python, Ray nor torch is in the test images; containers get them through read-only bind
mounts at the same paths (see ``container_mounts``), and the stand-in engine is copied into the venv.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

SIM_ROOT = Path(os.environ.get("SPARKC_SIM_ROOT", "/opt/sparkc-sim"))
VENV = SIM_ROOT / "venv"
# LiteLLM's proxy for the gateway's test image (simcluster/install.sh installs it; images.LITELLM_IMAGE runs it).
LITELLM_VENV = SIM_ROOT / "litellm-venv"
LITELLM_VERSION = "1.89.4"  # compiler/resolve/gateway.py's pinned release
STANDIN_SRC = Path(__file__).resolve().parent / "standin"
STANDIN_PACKAGE = "sparkc_standin"

_SGLANG_INIT = '"""sparkc-sim stand-in for SGLang: only ``python3 -m sglang.launch_server`` exists."""\n'
_SGLANG_LAUNCH = f"""\
\"\"\"``python3 -m sglang.launch_server``: the sparkc-sim stand-in engine.\"\"\"

import sys

from {STANDIN_PACKAGE}.sglang_cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
"""


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python3"


def site_packages(venv: Path = VENV) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {venv}/lib: run simcluster/install.sh")
    return found[0]


@cache
def _venv_home(venv: Path) -> Path:
    """The interpreter prefix the venv points at (``home`` in pyvenv.cfg, links resolved)."""
    cfg = venv / "pyvenv.cfg"
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(os.path.realpath(value.strip())).parent
    raise ValueError(f"{cfg} has no 'home' line")


def container_mounts(venv: Path = VENV) -> list[tuple[str, str]]:
    """(host path, container path) pairs to mount read-only so the image's shims find Python.

    Both sides are the same path: the venv's scripts and pyvenv.cfg name absolute paths.
    """
    home = _venv_home(venv)
    mounts = [(str(venv), str(venv))]
    if str(home) in ("/usr", "/usr/local"):
        # A distribution Python: mount only its own files, never the image's whole /usr.
        version = site_packages(venv).parent.name  # e.g. python3.11
        for rel in (f"bin/{version}", f"lib/{version}"):
            mounts.append((str(home / rel), str(home / rel)))
    else:
        mounts.append((str(home), str(home)))
    return mounts


def docker_mount_args(venv: Path = VENV) -> list[str]:
    """``container_mounts`` as ``docker run`` arguments: ["-v", "HOST:CONTAINER:ro", ...]."""
    args: list[str] = []
    for host, container in container_mounts(venv):
        args += ["-v", f"{host}:{container}:ro"]
    return args


def sync_runtime(venv: Path = VENV) -> Path:
    """Copies the stand-in into the venv as ``sparkc_standin`` plus an ``sglang`` shim package.

    Cheap (a dozen small files), so the cluster calls it on every start and edits to the stand-in
    take effect without re-running install.sh. Returns the installed package directory.
    """
    site = site_packages(venv)
    _replace_dir(site / STANDIN_PACKAGE, {p.name: p.read_text() for p in sorted(STANDIN_SRC.glob("*.py"))})
    _replace_dir(site / "sglang", {"__init__.py": _SGLANG_INIT, "launch_server.py": _SGLANG_LAUNCH})
    return site / STANDIN_PACKAGE


def _replace_dir(target: Path, files: dict[str, str]) -> None:
    # Write a fresh directory next to the target and swap it in, so a crash never leaves half a package.
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    for name, text in files.items():
        (tmp / name).write_text(text)
    os.chmod(tmp, 0o755)
    old = target.with_name(f".{target.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
