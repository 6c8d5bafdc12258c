"""Write compiled files into the output folder: the only module that writes.

The guarantee. After `emit(files, OUT)` returns, raises OutputFolderError, or is stopped by SIGINT or
SIGTERM at any point, OUT holds exactly one complete compile: the one that was there before (nothing,
for a new OUT) or the new one, never a mix of the two, and no files of sparkc's own making are left
behind. This also holds when several compiles write into one folder at once: they take turns, and the
folder ends as the last one left it. Files in OUT that no manifest listed (the user's own) are never
touched, nor is a listed file whose bytes are no longer those its manifest recorded (it is kept, and
named), nor anything outside OUT (compiler/output/out_records.py checks what OUT's records claim). OUT keeps
plain files and folders, so `scp -r` and `rsync` copy it as it is.

How:
1. Lock. An exclusive `flock` on `OUT/.sparkc.lock`: compiles into one folder run one after another.
   The holder deletes the file before it lets go, so an idle folder has none; whoever gets a lock
   checks that the name still leads to the file it locked, and starts again if not.
2. Stage. Every file is written and fsynced into `OUT/.sparkc-staging-XXXX`, with a journal of what
   is to move in and which stale files (an earlier manifest lists them with the sha256 they still
   have, the new compile does not write them) are to go. Staging inside OUT keeps every rename on
   one file system (no EXDEV for an OUT mounted elsewhere) and needs no write access to OUT's
   parent. A failure or signal here removes the staging folder; OUT is untouched.
3. Switch. With SIGINT and SIGTERM blocked, the staging folder is renamed `OUT/.sparkc-switch` (the
   point of no return), each file is moved in with `os.replace`, manifest.json last, the stale files
   are deleted, the switch folder and the lock go. The blocked signal is delivered right after, as
   KeyboardInterrupt (the CLI exits 130), with the new compile complete in OUT. While emit runs,
   SIGTERM raises KeyboardInterrupt as SIGINT does (unless the program set its own handler).
4. A process killed outright (SIGKILL, power loss) in the middle of a switch leaves the switch
   folder and its journal: the next compile into OUT first finishes that switch, and `--check`
   reports it as unfinished. A staging folder left by such a process is removed by the next compile.
   A switch folder that names anything but sparkc's own outputs, or holds links, is refused whole.

Not covered: someone reading OUT while a switch runs (a few renames long) can see part of each; a
rename that fails within the switch (an I/O error; what can be foreseen, such as a folder where a
file is to go, is checked before) stops it half way, says so, and the next compile finishes it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from compiler.output.deployment import DEPLOYMENT  # sourced by the scripts, never run: not executable
from compiler.output.folder_guard import (
    DOT_FILES,
    Lock,
    OutputFolderError,
    check_inside,
    check_out_dir,
    identity,
    plain_file,
    shared_lock,
    signals_held,
    sigterm_interrupts,
)
from compiler.output.out_records import (
    JOURNAL,
    MANIFEST,
    MAX_OUTPUT_BYTES,
    SCRIPT_WRITES,
    foreign,
    journal,
    linked,
    patch_files,
    previous_files,
    sha256_of,
    stale,
)

__all__ = ["MANIFEST", "Difference", "Emitted", "OutputFolderError", "compare", "differences", "emit"]

STAGING_PREFIX = ".sparkc-staging-"
SWITCH = ".sparkc-switch"


@dataclass(frozen=True)
class Emitted:
    """What a compile did besides writing: files an earlier compile wrote that it removed, and those it
    kept because they are no longer what that compile wrote (someone changed them) or are its inputs."""

    removed: list[str]
    kept: list[str]

    def as_json(self) -> dict[str, list[str]]:
        return {"removed": self.removed, "kept": self.kept}

    def kept_warning(self, out_dir: Path) -> str:
        return (
            f"warning: kept {', '.join(self.kept)} in {out_dir}: this spec does not produce them, but they are not"
            " (or no longer) what an earlier compile wrote, or one is read by this compile; delete those that are"
            " not yours"
        )


def emit(files: dict[str, str], out_dir: Path, spare: tuple[Path, ...] = ()) -> Emitted:
    """Write `files` into `out_dir`, removing the files an earlier compile wrote that these do not hold
    (those whose bytes are still what it recorded, and none of `spare`: the compile's inputs)."""
    for name in files:
        _check_name(name)
    check_out_dir(out_dir, files, spare)
    with _failing("cannot create the output folder", out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    with sigterm_interrupts():
        return _emit_locked(files, out_dir, spare)


def _emit_locked(files: dict[str, str], out_dir: Path, spare: tuple[Path, ...]) -> Emitted:
    with _failing("cannot write into the output folder", out_dir, untouched=True):
        lock = Lock(out_dir)
    staging: Path | None = None
    try:
        with signals_held(), _failing("cannot finish an earlier, interrupted compile in", out_dir):
            _recover(out_dir, spare)
        with _failing("cannot read the output folder", out_dir, untouched=True):
            removing, kept = stale(files, out_dir, spare)
        with _failing("cannot write into the output folder", out_dir, untouched=True):
            _check_targets(files, out_dir)
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))
            _stage(files, removing, staging)
        with signals_held():
            with _failing("cannot write into the output folder", out_dir, untouched=True):
                staging.rename(out_dir / SWITCH)
            staging = None
            with _failing("cannot finish writing the output folder", out_dir, interrupted=True):
                _finish_switch(out_dir, spare)
            lock.release()
    except BaseException:
        with signals_held():
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            lock.release()
        raise
    return Emitted(sorted(removing), kept)


@dataclass(frozen=True)
class Difference:
    """One way `out_dir` is not what the compile produced: `kind` is missing, differs, stale, unfinished or
    link (a symbolic link where sparkc or its scripts write); `found` is the file's bytes where it differs."""

    name: str
    kind: str
    found: bytes | None = None


def compare(files: dict[str, str], out_dir: Path) -> list[Difference]:
    """How the files in `out_dir` differ from `files` (for --check); empty when they are the same."""
    changed = []
    with _failing("cannot read the output folder", out_dir, reading=True), shared_lock(out_dir):
        links = {link for name in [*files, *SCRIPT_WRITES] if (link := linked(out_dir, name)) is not None}
        changed += [Difference(name, "link") for name in sorted(links)]
        for name, text in sorted(files.items()):
            if any(name == link or name.startswith(link + "/") for link in links):
                continue
            found = _read(out_dir / name)
            if found is None:
                changed.append(Difference(name, "missing"))
            elif found != text.encode("utf-8"):
                changed.append(Difference(name, "differs", found))
        # The patches folder ships whole: a file in it that this compile does not write is stale too.
        left = (set(previous_files(out_dir)) | set(patch_files(out_dir))) - set(files)
        changed += [Difference(name, "stale") for name in sorted(left) if os.path.lexists(out_dir / name)]
        if (out_dir / SWITCH).exists():
            changed.append(Difference(SWITCH, "unfinished"))
    return changed


def differences(files: dict[str, str], out_dir: Path) -> list[str]:
    """Names of files whose content in `out_dir` is not what the compile produced."""
    notes = {
        "stale": " (stale)",
        "unfinished": " (a compile was killed while writing; compile again to finish)",
        "link": " (a symbolic link: writes through it would land outside the folder)",
    }
    return [d.name + notes.get(d.kind, "") for d in compare(files, out_dir)]


# -- the steps -----------------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    """Generated names are relative and, but for DOT_FILES, never start with a dot, so they cannot meet
    sparkc's own hidden names."""
    parts = name.split("/")
    if name.startswith("/") or any(not part or (part.startswith(".") and part not in DOT_FILES) for part in parts):
        raise ValueError(f"generated file name {name!r} is not a plain relative path")


def _check_targets(files: dict[str, str], out_dir: Path) -> None:
    """Find what would stop a rename of the switch before it starts: a folder where a file is to go, or a
    link where a folder is (a write through it would land outside OUT); and a link where a file is to go,
    which someone put there (the rename would replace it, but --check would have read through it)."""
    for name in files:
        check_inside(out_dir, name)
        target = out_dir / name
        if target.is_symlink():
            raise OutputFolderError(
                f"{target} is a symbolic link, where sparkc writes a file of its own; remove it and compile again"
            )
        if target.is_dir() and not target.is_symlink():
            raise IsADirectoryError(errno.EISDIR, "a folder is where sparkc writes a file", str(target))


def _stage(files: dict[str, str], removing: dict[str, str], staging: Path) -> None:
    for name, text in files.items():
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, text.encode("utf-8"), 0o755 if name.endswith(".sh") and name != DEPLOYMENT else 0o644)
    order = sorted(files, key=lambda name: (name == MANIFEST, name))  # the manifest last
    record = {"write": order, "remove": removing}
    _write(staging / JOURNAL, json.dumps(record).encode("utf-8"), 0o644)
    _sync_folder(staging)


def _finish_switch(out_dir: Path, spare: tuple[Path, ...]) -> None:
    """Move the switch folder's files into OUT and delete the stale ones; safe to repeat after a kill.

    The switch folder may not be ours (a copied or committed OUT can carry one): its journal is followed
    only where it names sparkc's own outputs, as plain files, with no link on the way; anything else
    stops the compile before a file moves."""
    switch = out_dir / SWITCH
    write, remove = journal(switch, out_dir)
    for name in write:
        source = switch / name
        if plain_file(source):
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            source.replace(target)
    spared = {identity(path) for path in spare} - {None}
    for name, sha256 in remove.items():
        if identity(out_dir / name) not in spared:  # an input of this compile, whatever a journal says
            _remove_if_ours(out_dir, name, sha256)
    (switch / JOURNAL).unlink(missing_ok=True)
    shutil.rmtree(switch)
    _sync_folder(out_dir)


def _remove_if_ours(out_dir: Path, name: str, sha256: str) -> None:
    """Delete OUT/name if it still holds the bytes an earlier compile recorded; then its folder, if empty."""
    path = out_dir / name
    if sha256_of(path) != sha256:
        return
    path.unlink()
    if "/" in name:
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # a patches folder this compile writes nothing into


def _recover(out_dir: Path, spare: tuple[Path, ...]) -> None:
    """Finish a switch and remove staging folders that a killed compile left (we hold the lock: none is live)."""
    switch = out_dir / SWITCH
    if switch.is_symlink():
        raise foreign(switch, "it is a symbolic link")
    if switch.is_dir():
        _finish_switch(out_dir, spare)
    for leftover in out_dir.glob(STAGING_PREFIX + "*"):
        shutil.rmtree(leftover, ignore_errors=True)


# -- files, locks and signals ----------------------------------------------------------------------------


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, mode)  # the mode the scripts need, whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make renames in `folder` durable; some file systems cannot fsync a folder, which is no error."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _read(path: Path) -> bytes | None:
    """A file of OUT as --check compares it: None where no regular file is (a pipe is never waited on), and
    no more than sparkc ever writes (a larger file differs anyway: its first bytes show how)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open("rb") as stream:
            return stream.read(MAX_OUTPUT_BYTES)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


# -- errors the user can fix -------------------------------------------------------------------------------

_HINTS = {
    errno.EACCES: "check its permissions (and its parents') or choose another folder with -o",
    errno.EPERM: "check its permissions (and its parents') or choose another folder with -o",
    errno.EROFS: "that file system is read-only; choose another folder with -o",
    errno.ENOSPC: "that file system is full; free some space or choose another folder with -o",
    errno.EDQUOT: "your disk quota there is used up; free some space or choose another folder with -o",
    errno.EISDIR: "move it away or choose another folder with -o",
}


@contextlib.contextmanager
def _failing(
    doing: str, out_dir: Path, *, untouched: bool = False, interrupted: bool = False, reading: bool = False
) -> Iterator[None]:
    """Turn an OSError into an OutputFolderError that says what failed, where, why, and what to do."""
    try:
        yield
    except OSError as exc:
        where = Path(exc.filename) if exc.filename else out_dir
        reason = exc.strerror or str(exc)
        hint = _HINTS.get(exc.errno or 0, "choose another folder with -o")
        blocker = _file_in_the_way(where) if exc.errno in (errno.ENOTDIR, errno.EEXIST) else None
        if blocker is not None:
            reason, hint = f"{blocker} is a file, not a folder", "remove it or choose another folder with -o"
        elif reading and exc.errno in (errno.EACCES, errno.EPERM):
            hint = "make it readable for this user or run --check as its owner"
        shown = where != out_dir and STAGING_PREFIX not in str(where)  # a staged file's name says nothing
        message = f"{doing} {out_dir}: {reason}" + (f" ({where})" if shown else "") + f"; {hint}"
        if untouched:
            message += f"; {out_dir} was left as it was"
        if interrupted:
            message += f"; {out_dir} is half switched to the new files: fix this and compile again to finish"
        raise OutputFolderError(message) from None


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest of `path` and its parents that exists, if it is not a folder."""
    for candidate in (path, *path.parents):
        try:
            mode = candidate.stat().st_mode
        except OSError:
            continue
        return None if stat.S_ISDIR(mode) else candidate
    return None
