"""A hooks patch folder, read once at compile time: its files travel in the output folder, and their
hashes go into the manifest, so what a container was patched with is on record."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from compiler.user_files import UnreadableFile, read_bytes

# The folder travels inside the compiled output and over ssh at every launch: keep it small. The
# walk stops at MAX_ENTRIES files and folders, so a huge tree is refused without listing it whole.
MAX_BYTES = 4 * 1024 * 1024
MAX_FILES = 256
MAX_ENTRIES = 1024
# A patch folder reaches every worker and every container: a private key must not ride along with it.
KEY_NAME = re.compile(r"id_[A-Za-z0-9_-]+|ssh_host_[A-Za-z0-9_-]*key|authorized_keys|.*\.(pem|key|p12|pfx|ppk|jks)")
KEY_TEXT = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|PuTTY-User-Key-File-")


@dataclass(frozen=True)
class PatchFile:
    path: str  # relative to the folder, '/'-separated
    sha256: str


@dataclass(frozen=True)
class PatchFolder:
    name: str  # as the spec gives it
    files: tuple[PatchFile, ...] = ()
    texts: tuple[str, ...] = ()  # the files' contents, in the order of `files`
    problem: str = ""  # why the folder cannot be used; "" when it can

    @property
    def sha256(self) -> str:
        """One hash over every file's path and hash: the folder as a whole."""
        lines = "".join(f"{f.sha256}  {f.path}\n" for f in self.files)
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def read_patch_folder(spec_dir: Path, name: str) -> PatchFolder:
    problem = _outside(spec_dir, name)
    if problem:
        return PatchFolder(name, problem=problem)
    folder = spec_dir / name
    if not folder.is_dir():
        return PatchFolder(name, problem=f"the patch folder {name} does not exist beside the spec ({folder})")
    found = list(itertools.islice(folder.rglob("*"), MAX_ENTRIES + 1))
    if len(found) > MAX_ENTRIES:
        return PatchFolder(name, problem=f"{name} holds over {MAX_ENTRIES} files and folders; {_SMALL}")
    files: list[PatchFile] = []
    texts: list[str] = []
    total = 0
    for path in sorted(found):
        rel = path.relative_to(folder).as_posix()
        if path.is_dir() and not path.is_symlink() and not rel.startswith(".") and "/." not in rel:
            continue
        if len(files) >= MAX_FILES:
            return PatchFolder(name, problem=f"{name} holds over {MAX_FILES} files; {_SMALL}")
        read = _read_one(path, rel, f"{name}/{rel}", MAX_BYTES - total)
        if isinstance(read, str):
            return PatchFolder(name, problem=read)
        data, text = read
        total += len(data)
        files.append(PatchFile(rel, hashlib.sha256(data).hexdigest()))
        texts.append(text)
    if not files:
        return PatchFolder(name, problem=f"the patch folder {name} is empty")
    return PatchFolder(name, tuple(files), tuple(texts))


def _read_one(path: Path, rel: str, shown: str, room: int) -> tuple[bytes, str] | str:
    """A patch file's bytes and text, or why it cannot travel (`room`: the bytes the folder has left)."""
    if any(part.startswith(".") for part in rel.split("/")):
        return f"{shown}: hidden files and folders cannot be copied; rename it"
    if path.is_symlink() or not path.is_file():
        return f"{shown}: only plain files and folders can be copied, not links, pipes or devices"
    if KEY_NAME.fullmatch(path.name):
        return f"{shown}: named like a key or certificate; {_NO_KEYS}"
    try:
        data = read_bytes(path, room, follow_symlinks=False)
        text = data.decode("utf-8")
    except UnreadableFile as exc:
        if path.stat().st_size > room:
            return f"{shown}: the patch folder would hold over {MAX_BYTES // 1024 // 1024} MiB; {_SMALL}"
        return f"{shown}: {str(exc).removeprefix(f'{path}: ')}"
    except UnicodeDecodeError:
        return f"{shown}: not UTF-8 text; patches, scripts and sources only"
    if KEY_TEXT.search(text):
        return f"{shown}: holds a private key; {_NO_KEYS}"
    return data, text


_SMALL = f"a patch folder is patches and scripts: at most {MAX_FILES} files, {MAX_BYTES // 1024 // 1024} MiB in all"
_NO_KEYS = "it would be copied to every node and into every container: keep keys out of the patch folder"


def _outside(spec_dir: Path, name: str) -> str:
    """Why `name` is not a folder inside the spec's folder ("" when it is): absolute, `..`, or a link out."""
    fix = "name a folder beside the spec, relative to its folder, such as patches/fix"
    if name.startswith(("/", "~")) or "\\" in name:
        return f"the patch folder {name} is not relative to the spec's folder; {fix}"
    if ".." in name.split("/"):
        return f"the patch folder {name} leads out of the spec's folder (..); {fix}"
    try:
        inside = Path(os.path.realpath(spec_dir / name)).is_relative_to(os.path.realpath(spec_dir))
    except (OSError, ValueError):
        inside = False
    return "" if inside else f"the patch folder {name} leads out of the spec's folder through a link; {fix}"
