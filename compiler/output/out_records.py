"""What an output folder says about earlier compiles, read as claims to check, never as orders: its
manifest.json (which files an earlier compile wrote, with their sha256) and the journal of a switch
that a killed compile left. A copied or committed OUT can carry either, written by anyone.

- A file is deleted as stale only where the manifest lists it under a name sparkc generates (`generated`),
  its bytes are still those the manifest recorded, and it is none of the files to spare (the compile's
  inputs: the spec, its cluster file, the own profiles).
- A switch journal is followed only where every name in it is a name sparkc generates, every file to
  move in is a plain file, and no folder on the way (in OUT or in the switch folder) is a link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from compiler.output.folder_guard import (
    DOT_FILES,
    ENGINE_FILES,
    FLAT_FOLDERS,
    KUBERNETES,
    LIBRARY,
    PATCHES,
    SLURM,
    SYSTEMD,
    OutputFolderError,
    check_inside,
    identity,
    own_name,
    plain_file,
)
from compiler.output.plan_page import BUILD_SCRIPT, FILE_PURPOSES
from compiler.plan import BUILT_IMAGE_RECORD
from compiler.user_files import UnreadableFile, read_bytes

MANIFEST = "manifest.json"
JOURNAL = ".sparkc-journal.json"  # inside the staging and switch folders
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a manifest or journal this large was not written by sparkc
MAX_OUTPUT_BYTES = 64 * 1024 * 1024  # a file sparkc wrote is far smaller; a larger one is not its

# The files sparkc writes at the top of OUT (PLAN.md says what each is for), and the names it gives the
# files of its own folders; the patches folder holds the operator's files under their own names.
# The gateway folder of deployments compiled together (compiler/output/gateway.py): its scripts and LiteLLM's config.
GATEWAY_SCRIPTS = ("start-gateway.sh", "stop-gateway.sh")
GATEWAY_CONFIG = "litellm-config.yaml"
TOP_FILES = frozenset({*FILE_PURPOSES, BUILD_SCRIPT, *DOT_FILES, *GATEWAY_SCRIPTS, GATEWAY_CONFIG})
_FOLDER_NAMES = {
    LIBRARY: re.compile(r"sparkc-[0-9A-Za-z.+_-]+\.sh"),
    SYSTEMD: re.compile(r"[^/]+\.service"),
    ENGINE_FILES: re.compile(r"hostfile|[^/]+\.yaml"),
    KUBERNETES: re.compile(r"[^/]+\.yaml"),
    SLURM: re.compile(r"[^/]+\.sbatch"),
}


# What the scripts write into OUT as they run (their reports, logs and benchmark folders) and what
# `sparkc setup-fabric` writes there: a link at one of these names would take those writes elsewhere.
SCRIPT_WRITES = (
    "last-launch.txt",
    "distribute-report.txt",
    "fetch-report.txt",
    BUILT_IMAGE_RECORD,
    "logs",
    "bench",
    "setup-fabric.sh",
)


def linked(out_dir: Path, name: str) -> str | None:
    """The first of `name`'s parts, as an OUT name, that is a symbolic link in OUT; None where none is."""
    parts = name.split("/")
    for end in range(1, len(parts) + 1):
        if (out_dir.joinpath(*parts[:end])).is_symlink():
            return "/".join(parts[:end])
    return None


def generated(name: object) -> bool:
    """`name` is one sparkc gives a file it writes into OUT: only such files are ever deleted, whatever a
    manifest or journal says, so a user's own file (a cluster file, notes) is never one."""
    if not isinstance(name, str) or not own_name(name):
        return False
    folder, _, rest = name.partition("/")
    if not rest:
        return name in TOP_FILES
    pattern = _FOLDER_NAMES.get(folder)
    return folder == PATCHES or (pattern is not None and pattern.fullmatch(rest) is not None)


def journal(switch: Path, out_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The switch folder's journal, checked: names of files to move in, and of files to delete with the
    sha256 an earlier compile recorded for each. OutputFolderError where it is not one sparkc wrote."""
    try:
        found: Any = json.loads(read_bytes(switch / JOURNAL, MAX_RECORD_BYTES, follow_symlinks=False))
    except UnreadableFile as exc:
        if not os.path.lexists(switch / JOURNAL):
            return [], {}  # killed after the journal went: everything was moved already
        raise foreign(switch, str(exc)) from None
    except ValueError:
        raise foreign(switch, "its journal is not JSON") from None
    write = found.get("write") if isinstance(found, dict) else None
    remove = found.get("remove") if isinstance(found, dict) else None
    if not isinstance(write, list) or not isinstance(remove, dict):
        raise foreign(switch, "its journal is not one this sparkc writes")
    for name in [*write, *remove]:
        if not generated(name):
            raise foreign(switch, f"its journal names {name!r}, which is not a file sparkc writes")
        check_inside(out_dir, name)
        check_inside(switch, name)
        if name in write and os.path.lexists(switch / name) and not plain_file(switch / name):
            raise foreign(switch, f"{name} in it is not a plain file")
    if not all(isinstance(sha, str) for sha in remove.values()):
        raise foreign(switch, "its journal is not one this sparkc writes")
    return write, remove


def foreign(switch: Path, why: str) -> OutputFolderError:
    return OutputFolderError(
        f"{switch} was not left by an interrupted sparkc compile: {why}; nothing was moved or deleted. "
        f"Look at it, delete {switch} and compile again"
    )


def sha256_of(path: Path) -> str | None:
    """The sha256 of a plain file (no link, no pipe), or None."""
    try:
        return hashlib.sha256(read_bytes(path, MAX_OUTPUT_BYTES, follow_symlinks=False)).hexdigest()
    except UnreadableFile:
        return None


def previous_files(out_dir: Path) -> dict[str, str]:
    """Files an earlier compile wrote, with the sha256 its manifest recorded for each (the scripts, the
    library, and the patch folder's files); never anything else in the folder."""
    try:
        manifest: Any = json.loads(read_bytes(out_dir / MANIFEST, MAX_RECORD_BYTES, follow_symlinks=False))
    except (UnreadableFile, ValueError):
        return {}
    if not isinstance(manifest, dict):
        return {}
    listed = manifest.get("files")
    found: dict[str, object] = {}
    if isinstance(listed, dict):
        # The top-level outputs, the library (lib/NAME) and the unit (systemd/NAME); the patch folder's
        # files come from the plan.
        found.update((name, sha) for name, sha in listed.items() if "/" not in name or _flat_file(name))
    plan = manifest.get("plan")
    hooks = plan.get("hooks") if isinstance(plan, dict) else None
    patches = hooks.get("patches") if isinstance(hooks, dict) else None
    for patch in patches if isinstance(patches, list) else []:
        if isinstance(patch, dict) and isinstance(patch.get("path"), str):
            found[f"{PATCHES}/{patch['path']}"] = patch.get("sha256")
    return {name: sha for name, sha in found.items() if generated(name) and isinstance(sha, str)}


def _flat_file(name: str) -> bool:
    folder, _, rest = name.partition("/")
    return folder in FLAT_FOLDERS and bool(rest) and "/" not in rest


def stale(files: dict[str, str], out_dir: Path, spare: tuple[Path, ...]) -> tuple[dict[str, str], list[str]]:
    """Of the files in OUT this compile does not write: those an earlier compile wrote and that still hold
    its bytes (to delete, with their sha256), and the rest of them that matter (kept, for a warning): a
    listed file changed since, one of `spare`, and any file in the patches folder, which ships whole."""
    spared = {identity(path) for path in spare} - {None}
    remove: dict[str, str] = {}
    kept: list[str] = []
    previous = previous_files(out_dir)
    for name in sorted(set(previous) | set(patch_files(out_dir))):
        path = out_dir / name
        if name in files or not os.path.lexists(path):
            continue
        try:
            check_inside(out_dir, name)
        except OutputFolderError:
            kept.append(name)
            continue
        if name in previous and identity(path) not in spared and sha256_of(path) == previous[name]:
            remove[name] = previous[name]
        else:
            kept.append(name)
    return remove, kept


def patch_files(out_dir: Path) -> list[str]:
    """Every file in OUT's patches folder (a real folder; links in it are not followed), as OUT names."""
    folder = out_dir / PATCHES
    if folder.is_symlink() or not folder.is_dir():
        return []
    names = []
    for root, _folders, found in os.walk(folder):
        rel = Path(root).relative_to(out_dir).as_posix()
        names += [f"{rel}/{name}" for name in found]
    return sorted(names)
