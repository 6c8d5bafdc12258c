"""Host paths that climb out or name the system's folders. They only report.

The weights' folder is mirrored to every node with `rsync --delete` (distribute.sh) and downloaded into
(fetch-model.sh); the compile cache is written by every container. A spec that named /, /etc or
/home/x/../../usr there would have every node's copy of that folder replaced. A `..` segment makes a path
say something other than it looks: refused everywhere, as are the system's own folders themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, Path, error
from compiler.resolve.context import Deployment

# Folders that hold the system or every user's files: never a host path of a spec.
SYSTEM_FOLDERS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp", "/usr", "/usr/local", "/var",
    "/var/cache", "/var/lib", "/var/log",
})  # fmt: skip
# The system's own folders: nothing sparkc writes (or mounts writable) lives inside them.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
)


# Folders of a home that hold the user's keys: no container sees them, read-only or not.
HOME_KEYS = (".ssh", ".gnupg")


def home_problem(value: str) -> str:
    """Why a path under ~/ (the ssh user's home on each node) is refused ('' when it is not)."""
    parts = [p for p in value[2:].split("/") if p not in ("", ".")]
    if ".." in parts:
        return f"{value!r} must not contain '..' segments: write the folder's own path under ~/"
    if not parts:
        return f"{value!r} must not be the home folder itself (it holds the ssh keys): name a folder inside it"
    if parts[0] in HOME_KEYS:
        return f"{value!r} must not be ~/{parts[0]} or inside it (the user's keys): mount a folder of its own"
    return ""


def path_problem(value: str, data: bool) -> str:
    """Why a host path is refused ('' when it is not). data: something is copied, downloaded or written
    there (not only read), so the system's trees are refused as well as their roots."""
    if value.startswith("~/"):
        return home_problem(value)
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        return f"{value!r} must not contain '..' segments: write the folder's own absolute path"
    canonical = "/" + "/".join(parts)
    if canonical in SYSTEM_FOLDERS:
        return f"{value!r} must not be the system folder {canonical}: name a folder of its own inside it"
    tree = next((t for t in SYSTEM_TREES if canonical.startswith(t + "/")), None)
    if data and tree is not None:
        return f"{value!r} must not be inside the system folder {tree}: use a folder of its own, such as /home/USER/..."
    return ""


def _host_paths(d: Deployment) -> Iterator[tuple[Path, str, bool, str]]:
    """(where, the path, whether data is written or copied there, what it is for) for each host path."""
    model, container, ssh = d.spec.model, d.spec.container, d.spec.cluster.ssh
    mirrored = "distribute.sh mirrors it to every node with rsync --delete"
    if model.is_given("path"):
        yield model.at("path"), model.path, True, mirrored
    if model.hf is not None:
        yield model.at("hf_cache"), model.hf.cache, True, "fetch-model.sh downloads into it"
    if model.draft is not None and model.draft.path is not None:
        yield model.draft.at("path"), model.draft.path, True, mirrored
    if container.cache_host is not None:
        yield container.at("cache", "host"), container.cache_host, True, "every container writes its caches there"
    for mount in container.mounts:
        why = "the containers read it" if mount.readonly else "the containers write to it, readonly: false"
        yield mount.at("host"), mount.host, not mount.readonly, why
    if ssh.identity_file is not None:
        yield ssh.at("identity_file"), ssh.identity_file, False, "ssh reads the key from it"


def host_paths(d: Deployment) -> Iterator[Diagnostic]:
    for where, value, data, why in _host_paths(d):
        problem = path_problem(value, data)
        if problem:
            yield error(where, f"{problem} ({why})")


RULES = (host_paths,)
