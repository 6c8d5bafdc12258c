"""Write compiled files into the output folder: the only module that writes.

Everything is rendered and checked in memory first, so a failed compile never reaches this point
and leaves the folder as it was; files are written beside the folder and moved in one by one.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from compiler.render import MANIFEST


def emit(files: dict[str, str], out_dir: Path) -> list[str]:
    """Write `files` into `out_dir`; returns the names of stale files from an earlier compile it removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stale = sorted(set(_previous_files(out_dir)) - set(files))
    staging = Path(tempfile.mkdtemp(prefix=".sparkc-", dir=out_dir.parent))
    try:
        for name, text in sorted(files.items()):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o755 if name.endswith(".sh") else 0o644)
        for name in sorted(files):
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name in stale:
        (out_dir / name).unlink(missing_ok=True)
    return stale


def differences(files: dict[str, str], out_dir: Path) -> list[str]:
    """Names of files whose content in `out_dir` is not what the compile produced (for --check)."""
    changed = []
    for name, text in sorted(files.items()):
        path = out_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            changed.append(name)
    changed += [f"{name} (stale)" for name in sorted(set(_previous_files(out_dir)) - set(files))]
    return changed


def _previous_files(out_dir: Path) -> list[str]:
    """Files an earlier compile wrote, as its manifest lists them (never anything else in the folder)."""
    manifest = out_dir / MANIFEST
    try:
        listed = json.loads(manifest.read_text(encoding="utf-8")).get("files", {})
    except (OSError, ValueError, AttributeError):
        return []
    names = [str(n) for n in listed if isinstance(n, str) and "/" not in n and not n.startswith(".")]
    return names + [MANIFEST] if manifest.exists() else names
