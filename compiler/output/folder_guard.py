"""The output folder's guards: one compile at a time (a lock file), SIGINT/SIGTERM held while files
move in, so the folder is never left half switched, and the names and paths sparkc may write to."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from compiler.user_files import UnreadableFile, read_bytes

LOCK = ".sparkc.lock"
PATCHES = "patches"  # the folder a hooks patch folder is copied to (compiler.plan.PATCHES_DIR)
LIBRARY = "lib"  # the folder of sparkc's library, one file per sparkc version (compiler.output.library)
SYSTEMD = "systemd"  # the folder of the deployment's systemd unit (written by compiler.output.render)
ENGINE_FILES = "trtllm"  # TensorRT-LLM's options file and mpirun's hostfile (compiler.engines.trtllm.FILES_DIR)
KUBERNETES = "kubernetes"  # compile --target kubernetes: the manifests (compiler.output.kubernetes.FOLDER)
SLURM = "slurm"  # compile --target slurm: the batch script (compiler.output.slurm.FOLDER)
# Folders of OUT that hold files of their own, one level deep.
FLAT_FOLDERS = frozenset({LIBRARY, SYSTEMD, ENGINE_FILES, KUBERNETES, SLURM})
# The one generated name that starts with a dot (it tells review tools that lib/ is generated).
DOT_FILES = frozenset({".gitattributes"})
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class OutputFolderError(Exception):
    """The output folder cannot be written or read: the user's to fix (permissions, space, a file in the way)."""


def own_name(name: object) -> bool:
    """A name sparkc may have written into OUT: relative, '/'-separated, no part empty or hidden (so no
    `..` and none of sparkc's own lock and switch names; .gitattributes is its one dot file), top level,
    inside the patches folder, or a file of lib/, systemd/, trtllm/, kubernetes/ or slurm/."""
    if not isinstance(name, str) or not name or "\x00" in name or name.startswith("/"):
        return False
    if name in DOT_FILES:
        return True
    parts = name.split("/")
    where = len(parts) == 1 or parts[0] == PATCHES or (parts[0] in FLAT_FOLDERS and len(parts) == 2)
    return all(part and not part.startswith(".") for part in parts) and where


def check_inside(base: Path, name: str) -> None:
    """Every folder between `base` and `base/name` is a real folder (or missing): none is a symbolic link,
    so a write or delete there stays inside `base`."""
    folder = base
    for part in name.split("/")[:-1]:
        folder = folder / part
        try:
            mode = folder.lstat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "a file"
            raise OutputFolderError(
                f"{folder} is {what}, not a folder: sparkc writes only inside {base}; remove it and compile again"
            )


def plain_file(path: Path) -> bool:
    """`path` is a regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file `path` leads to, or None where there is none."""
    try:
        found = path.stat()
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


def check_out_dir(out_dir: Path, names: Iterable[str], spare: tuple[Path, ...]) -> None:
    """Refuse `/` and the home folder as OUT (sparkc's files would mix with everything else there), and an
    OUT where a file sparkc writes is one of `spare` (its inputs: the compile would overwrite one)."""
    real = Path(os.path.realpath(out_dir))
    if real == Path("/"):
        raise OutputFolderError(f"{out_dir} is the root folder: {_OWN_FOLDER}")
    with contextlib.suppress(RuntimeError, KeyError):
        if real == Path(os.path.realpath(Path.home())):
            raise OutputFolderError(f"{out_dir} is your home folder: {_OWN_FOLDER}")
    spared = {identity(path) for path in spare} - {None}
    for name in names:
        if identity(out_dir / name) in spared:
            raise OutputFolderError(
                f"{out_dir / name} is read by this compile (the spec itself, its cluster file or a profile), and "
                "the compile writes a file of that name there; rename it or choose another folder with -o"
            )


_OWN_FOLDER = "sparkc writes its files into a folder of their own; choose one with -o, for example -o build"


def check_same_deployment(out_dir: Path, name: str) -> None:
    """Refuse an OUT that holds another deployment's compile (its manifest.json names another): writing there
    would replace that deployment's scripts, among them the stop-cluster.sh of containers that may be running.
    A recompile of the same deployment, or a folder without a manifest, passes."""
    try:
        manifest = json.loads(read_bytes(out_dir / "manifest.json", 64 * 1024 * 1024, follow_symlinks=False))
    except (UnreadableFile, OSError, ValueError, RecursionError):  # a name too long: the write reports it
        return
    plan = manifest.get("plan") if isinstance(manifest, dict) else None
    other = plan.get("name") if isinstance(plan, dict) else None
    if not isinstance(other, str) or other == name:
        return
    shown = f"'{other}'" if re.fullmatch(r"[a-z][a-z0-9-]{0,62}", other) else "another deployment"
    raise OutputFolderError(
        f"{out_dir} holds the compile of deployment {shown}, not '{name}': writing here would replace its scripts, "
        f"and with them the stop-cluster.sh and status.sh of its containers, which may be running. Choose another "
        f"folder (-o {out_dir / name}), or stop that deployment first ({out_dir}/stop-cluster.sh) and pass --force "
        "to replace it"
    )


def same_file(fd: int, path: Path) -> bool:
    try:
        named = path.lstat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


class Lock:
    """The exclusive lock on OUT/.sparkc.lock, deleted by its holder before it is let go."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / LOCK
        self.fd: int | None = None
        while self.fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # waits for a compile into the same folder
                if same_file(fd, self.path):
                    self.fd = fd
                    return
            except BaseException:
                # Interrupted while waiting: delete the file only if nobody else holds it.
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if same_file(fd, self.path):
                        self.path.unlink()
                os.close(fd)
                raise
            os.close(fd)  # the holder deleted it meanwhile: lock the new one

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            os.close(self.fd)
            self.fd = None


@contextlib.contextmanager
def shared_lock(out_dir: Path) -> Iterator[None]:
    """For reading: wait for a compile that holds the lock; never creates the lock file."""
    path = out_dir / LOCK
    fd: int | None = None
    while fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            break  # no compile is writing
        fcntl.flock(fd, fcntl.LOCK_SH)
        if not same_file(fd, path) and path.exists():
            os.close(fd)  # the holder deleted it and another compile made a new one: wait for that
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While emit runs, SIGTERM raises KeyboardInterrupt as SIGINT does, so that the cleanup runs for it too.

    Left alone where SIGTERM already has a handler or is ignored, and off the main thread (which gets signals).
    """
    install = (
        threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )
    if install:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Block SIGINT and SIGTERM for the block; one that arrives meanwhile is delivered when it ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
