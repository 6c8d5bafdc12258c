"""A hooks patch folder, read once at compile time: its files travel in the output folder, and their
hashes go into the manifest, so what a container was patched with is on record."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

# The folder travels inside the compiled output and over ssh at every launch: keep it small.
MAX_BYTES = 4 * 1024 * 1024
MAX_FILES = 256


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
    folder = spec_dir / name
    if not folder.is_dir():
        return PatchFolder(name, problem=f"the patch folder {name} does not exist beside the spec ({folder})")
    files: list[PatchFile] = []
    texts: list[str] = []
    total = 0
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            return PatchFolder(name, problem=f"{name}/{rel}: hidden files and folders cannot be copied; rename it")
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            return PatchFolder(name, problem=f"{name}/{rel}: only plain files and folders can be copied, not links")
        if path.is_dir():
            continue
        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
        except OSError as exc:
            return PatchFolder(name, problem=f"{name}/{rel}: cannot read: {exc.strerror}")
        except UnicodeDecodeError:
            return PatchFolder(name, problem=f"{name}/{rel}: not UTF-8 text; patches, scripts and sources only")
        total += len(data)
        if total > MAX_BYTES or len(files) >= MAX_FILES:
            return PatchFolder(name, problem=f"{name} holds over {MAX_FILES} files or {MAX_BYTES} bytes; keep it small")
        files.append(PatchFile(rel, hashlib.sha256(data).hexdigest()))
        texts.append(text)
    if not files:
        return PatchFolder(name, problem=f"the patch folder {name} is empty")
    return PatchFolder(name, tuple(files), tuple(texts))
