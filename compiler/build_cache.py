"""Compiles remembered between runs: a compile, or `compile --check`, whose inputs did not change skips
loading, validating, resolving, rendering and linting, and importing the libraries for them.

An entry's key is everything a compile's output depends on: the spec's bytes, the name the spec is
recorded as and the name its diagnostics use, --strict, every file of sparkc itself (code, templates,
schemas, profiles; by content), the installed distributions (their dist-info names carry versions),
Python's version, and the identities and flags of shellcheck and bash. An entry holds what that compile
produced (the files' texts, its diagnostics as printed, the head node, the state of each file of this
machine it looked at: the weights' index) and is written only after the files passed lint, so a hit hands
out only linted text, and only while each of those files is in the state the compile saw. As with every
cache here, anything wrong with an entry or the folder reads as a miss, and the compile runs in full.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.cache import cache_home, file_state, write_quietly
from compiler.user_files import UnreadableFile, read_bytes

if TYPE_CHECKING:
    from compiler.pipeline import CompileResult

FORMAT = b"sparkc-build-cache-2\n"
KEEP = 64  # entries kept; older ones go when a new one is written
SETTLED_NS = 2_000_000_000  # sparkc's own files changed less than this ago are read on every run
MAX_SPEC_BYTES = 4 << 20  # a larger file is never remembered (the loader refuses it anyway)


@dataclass(frozen=True)
class Build:
    """What a clean compile produced, and what it printed."""

    files: dict[str, str]
    text_report: str  # diagnostics as `--format text` prints them ("" for none)
    json_report: list[dict[str, object]]  # the same as `--format json` lists them
    head: str
    # Files of this machine the compile looked at, each with its state before it was read (cache.file_state):
    # the entry is used only while every one is still in that state.
    consulted: dict[str, str] = field(default_factory=dict)


def spec_key(spec: Path, shown: str, recorded: str, strict: bool) -> str | None:
    """The key of compiling `spec`; None where it cannot be read or sparkc cannot name its own inputs."""
    installation = _installation()
    if installation is None:
        return None
    try:
        data = read_bytes(spec, MAX_SPEC_BYTES)  # a FIFO or device: no key (the compile then says why)
    except UnreadableFile:
        return None
    digest = hashlib.sha256(FORMAT + installation)
    for part in (shown, recorded, "strict" if strict else "plain"):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(data)
    return digest.hexdigest()


def build_of(result: CompileResult) -> Build:
    """What a clean compile produced, to remember (its diagnostics formatted as the CLI prints them)."""
    from compiler.diagnostics import format_json, format_text

    filename, data = result.document.filename, result.document.data
    return Build(
        files=result.files,
        text_report=format_text(result.diagnostics, filename, data) if result.diagnostics else "",
        json_report=json.loads(format_json(result.diagnostics, filename, data))["diagnostics"],
        head=result.plan.head if result.plan else "?",
        consulted=dict(result.consulted),
    )


def lookup_valid(key: str | None) -> Build | None:
    """A compile or a validation of the spec `key` names: either says the spec is valid, and with which
    warnings (a compile's diagnostics are a validation's: rendering adds none)."""
    return lookup(key) or lookup(_validated(key))


def store_valid(key: str | None, build: Build) -> None:
    """A validation, kept under a key of its own and without files: no compile takes it for one."""
    store(_validated(key), replace(build, files={}))


def _validated(key: str | None) -> str | None:
    return hashlib.sha256(f"validated\0{key}".encode()).hexdigest() if key else None


def lookup(key: str | None) -> Build | None:
    folder = _folder()
    if key is None or folder is None:
        return None
    try:
        data = (folder / key).read_bytes()
    except (OSError, ValueError):
        return None
    head, digest, payload = data[: len(FORMAT)], data[len(FORMAT) : len(FORMAT) + 32], data[len(FORMAT) + 32 :]
    if head != FORMAT or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        entry = json.loads(payload)
        build = Build(entry["files"], entry["text_report"], entry["json_report"], entry["head"], entry["consulted"])
    except (ValueError, KeyError, TypeError):
        return None
    shapes = (
        all(isinstance(d, dict) for d in (build.files, build.consulted))
        and all(isinstance(k, str) and isinstance(v, str) for d in (build.files, build.consulted) for k, v in d.items())
        and isinstance(build.text_report, str)
        and isinstance(build.json_report, list)
        and isinstance(build.head, str)
    )
    if not shapes or any(file_state(path) != state for path, state in build.consulted.items()):
        return None
    return build


def store(key: str | None, build: Build) -> None:
    folder = _folder()
    if key is None or folder is None:
        return
    payload = json.dumps(
        {
            "files": build.files,
            "text_report": build.text_report,
            "json_report": build.json_report,
            "head": build.head,
            "consulted": build.consulted,
        },
        ensure_ascii=False,
    ).encode("utf-8", "surrogatepass")
    write_quietly(folder / key, FORMAT + hashlib.sha256(payload).digest() + payload)
    _prune(folder)


def _prune(folder: Path) -> None:
    try:
        entries = [(p.stat().st_mtime_ns, p) for p in folder.iterdir() if len(p.name) == 64]
        for _, path in sorted(entries, reverse=True)[KEEP:]:
            path.unlink()
    except OSError:
        pass


def _folder() -> Path | None:
    home = cache_home()
    return home / "builds" if home else None


@lru_cache(maxsize=1)
def _installation() -> bytes | None:
    """A digest of everything besides the spec that a compile's output depends on."""
    from compiler import lint
    from compiler.resources import data_dir

    digest = hashlib.sha256(f"{sys.version}\0{sys.platform}\0".encode())
    try:
        shellcheck = lint.shellcheck_binary()
        folders = [Path(lint.__file__).parent, *(data_dir(name) for name in ("templates", "schemas", "profiles"))]
        files = [
            (folder, path, path.stat())
            for folder in folders
            for path in sorted(folder.rglob("*"))
            if "__pycache__" not in path.parts and path.suffix != ".pyc"
        ]
        digest.update(_sources_digest([f for f in files if stat.S_ISREG(f[2].st_mode)]))
    except (OSError, ValueError):
        return None
    tools = f"{lint._identity(shellcheck)}\0{lint._identity(lint.bash_binary())}\0{lint.SHELLCHECK_FLAGS}"
    digest.update(tools.encode("utf-8", "surrogatepass"))
    for entry in sys.path:
        if "site-packages" not in entry and "dist-packages" not in entry:
            continue  # the working folder and the standard library: not where distributions are installed
        try:
            names = sorted(p.name for p in Path(entry).iterdir() if p.suffix in (".dist-info", ".egg-info", ".pth"))
        except OSError:
            continue
        digest.update(f"\0{entry}\0{names}".encode("utf-8", "surrogatepass"))
    return digest.digest()


def _sources_digest(files: list[tuple[Path, Path, os.stat_result]]) -> bytes:
    """The digest of sparkc's own files by content, remembered under their stat data (path, size, inode,
    modification and change times: rewriting a file changes its change time, which no tool sets back),
    so that a run that finds them as they were reads none of them. As git does with its index, files
    changed in the last moments are not remembered: a second change within the clock's granularity
    would leave the same times."""
    seen = hashlib.sha256(FORMAT)
    settled = time.time_ns() - SETTLED_NS
    for _, path, st in files:
        seen.update(
            f"{path}\0{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}\0".encode("utf-8", "surrogatepass")
        )
    home = cache_home()
    remembered = home / "sources" / seen.hexdigest() if home else None
    if remembered is not None:
        try:
            data = remembered.read_bytes()
            if len(data) == 64 and hashlib.sha256(data[:32]).digest() == data[32:]:
                return data[:32]
        except (OSError, ValueError):
            pass
    content = hashlib.sha256()
    for folder, path, _ in files:
        content.update(f"\0{path.relative_to(folder)}\0".encode("utf-8", "surrogatepass"))
        content.update(path.read_bytes())
    found = content.digest()
    if remembered is not None and all(max(st.st_mtime_ns, st.st_ctime_ns) < settled for _, _, st in files):
        write_quietly(remembered, found + hashlib.sha256(found).digest())
        _prune(remembered.parent)
    return found
