"""The output folder: one complete compile in it at any time, plain files, and errors the user can act on.

Most tests run sparkc in a child process (CHILD below) that can slow the file system down, report each
step on stdout for the test to time a signal, leave out shellcheck (slow, and nothing to do with the
folder), and, when the tests run as root, give up root right after the compile so that permissions
really stop it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE

import pytest

import compiler.output.emit as emit_module
import compiler.pipeline as pipeline
from compiler.cli.main import main
from compiler.output.emit import differences, emit
from compiler.output.lint import Lint
from compiler.pipeline import CompileResult, compile_text
from tests.product import PACKAGE_HOME
from tests.specs import EXAMPLES

OLD_SPEC = EXAMPLES / "solo-qwen3-32b.yaml"


def _same_deployment_on_two_nodes() -> Path:
    """The two-node native example under the solo example's deployment name: a recompile of one deployment
    whose files change (sparkc refuses to replace another deployment's compile without --force). Readable
    by the unprivileged user some tests compile as."""
    folder = Path(tempfile.mkdtemp(prefix="sparkc-emit-"))
    atexit.register(shutil.rmtree, folder, True)
    folder.chmod(0o755)
    spec = folder / "qwen3-32b-on-two-nodes.yaml"
    text = (EXAMPLES / "llama33-70b-2spark-native.yaml").read_text(encoding="utf-8")
    spec.write_text(text.replace("\nname: llama33-70b\n", "\nname: qwen3-32b\n", 1), encoding="utf-8")
    spec.chmod(0o644)
    return spec


NEW_SPEC = _same_deployment_on_two_nodes()
NOBODY = 65534

CHILD = """
import os, random, sys, time
import compiler.cli.main as cli
import compiler.pipeline as pipeline
from compiler.output.lint import Lint

def announce(what):
    sys.stdout.write("@" + what + "\\n")
    sys.stdout.flush()

def slowed(name, real, seconds):
    def call(*args, **kwargs):
        announce(name)
        time.sleep(seconds * random.uniform(0, 3))  # uneven, so that concurrent writers overtake each other
        return real(*args, **kwargs)
    return call

pipeline.start_lint = lambda files, *_, **__: Lint()
slow = float(os.environ.get("SLOW", "0"))
if slow:
    os.fsync = slowed("fsync", os.fsync, slow / 3)
    os.rename = slowed("rename", os.rename, slow)
    os.replace = slowed("replace", os.replace, slow)
compile_spec = cli.compile_spec

def ready_then_compile(*args, **kwargs):
    announce("ready")
    result = compile_spec(*args, **kwargs)
    if os.environ.get("DROP_ROOT") and os.geteuid() == 0:
        # What sparkc imports later must be loaded now: nobody may not read the install (CI's venv lies in
        # a 0700 temporary folder, its Python under /root), where a user's own install is theirs to read.
        import importlib, importlib.metadata, pkgutil
        import compiler
        for module in pkgutil.walk_packages(compiler.__path__, "compiler."):
            if not module.name.endswith("__main__"):  # that one runs the command line
                importlib.import_module(module.name)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    if os.environ.get("GATE"):
        announce("compiled")
        sys.stdin.readline()  # write only when the test opens the gate, together with the others
    return result

cli.compile_spec = ready_then_compile
for _ in range(int(os.environ.get("ROUNDS", "1")) - 1):
    if cli.main(sys.argv[1:]):
        os._exit(1)
    announce("done")
# os._exit straight from main's return value: no Python code runs after main, where a late signal
# would be the harness's traceback, not sparkc's.
os._exit(cli.main(sys.argv[1:]))
"""


def child(*argv: str | Path) -> list[str]:
    """The command line of a sparkc child process (stdout unbuffered, for its step announcements)."""
    return [sys.executable, "-u", "-c", CHILD, *map(str, argv)]


def child_env(slow: float = 0, drop_root: bool = False) -> dict[str, str]:
    """SLOW: seconds each rename sleeps (fsync a third of it); DROP_ROOT: run the write as nobody if root."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLOW", "DROP_ROOT", "GATE", "ROUNDS", "SPARKC_DEBUG")}
    env["SLOW"] = str(slow)
    if drop_root:
        env["DROP_ROOT"] = "1"
    return env


def run_child(*argv: str | Path, slow: float = 0, drop_root: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        child(*argv), cwd=PACKAGE_HOME, env=child_env(slow, drop_root), capture_output=True, text=True, timeout=60
    )


def tree(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Everything in `folder`, hidden names included: path -> (mode, content; None for a folder)."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_mode, None if p.is_dir() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
    }


def compiled(spec: Path) -> CompileResult:
    """As the CLI compiles `spec` (named by its absolute path, as the children get it), without shellcheck."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "start_lint", lambda files, *_, **__: Lint())
        result = compile_text(spec.read_text(encoding="utf-8"), str(spec))
    assert result.ok
    return result


@pytest.fixture
def no_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process compiles here are about the folder: shellcheck only takes time."""
    monkeypatch.setattr(pipeline, "start_lint", lambda files, *_, **__: Lint())


@pytest.fixture(scope="module")
def old() -> CompileResult:
    return compiled(OLD_SPEC)


@pytest.fixture(scope="module")
def new() -> CompileResult:
    return compiled(NEW_SPEC)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A scratch folder the unprivileged child can reach (pytest's tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="sparkc-emit-"))
    path.chmod(0o755)
    yield path
    for sub in [path, *path.rglob("*")]:
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)
    shutil.rmtree(path)


def runner_owns(path: Path) -> None:
    """Make `path` the child's own: it runs as nobody when the tests run as root."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)


# -- where the folder is ---------------------------------------------------------------------------------


def test_writable_folder_under_a_read_only_parent_compiles(open_tmp: Path) -> None:
    parent = open_tmp / "parent"
    out = parent / "out"
    out.mkdir(parents=True)
    runner_owns(out)
    parent.chmod(0o555)
    result = run_child("compile", OLD_SPEC, "-o", out, drop_root=True)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        ".gitattributes",
        "PLAN.md",
        "bench.sh",
        "deployment.sh",
        "distribute.sh",
        "fetch-model.sh",
        "install-service.sh",
        "launch-cluster.sh",
        "lib",
        "logs.sh",
        "manifest.json",
        "status.sh",
        "stop-cluster.sh",
        "systemd",
        "watch.sh",
    ]
    assert [p.name for p in parent.iterdir()] == ["out"]


def test_folder_on_another_file_system_compiles(tmp_path: Path) -> None:
    """OUT is a mount point of its own: every rename stays inside it (no EXDEV)."""
    out = tmp_path / "out"
    out.mkdir()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("mounting a file system on OUT needs root and unshare")
    script = (
        'mount -t tmpfs sparkc-test "$1" || exit 99; shift; '
        '"$@" compile "$OLD" -o "$OUT" >/dev/null && "$@" compile "$NEW" -o "$OUT" >/dev/null && ls -A "$OUT"'
    )
    env = child_env() | {"OLD": str(OLD_SPEC), "NEW": str(NEW_SPEC), "OUT": str(out)}
    result = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", str(out), *child()],
        cwd=PACKAGE_HOME,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == [  # sorted: ls orders by the locale
        ".gitattributes",
        "PLAN.md",
        "bench.sh",
        "deployment.sh",
        "distribute.sh",
        "fetch-model.sh",
        "install-service.sh",
        "launch-cluster.sh",
        "lib",
        "logs.sh",
        "manifest.json",
        "status.sh",
        "stop-cluster.sh",
        "systemd",
        "watch.sh",
    ]


# -- errors that are the user's to fix ---------------------------------------------------------------------


def test_folder_that_is_not_writable_is_exit_2_and_left_as_it_was(open_tmp: Path, old: CompileResult) -> None:
    out = open_tmp / "out"
    emit(old.files, out)
    before = tree(out)
    out.chmod(0o555)
    result = run_child("compile", NEW_SPEC, "-o", out, drop_root=True)
    assert result.returncode == 2, result.stderr
    assert f"cannot write into the output folder {out}: Permission denied" in result.stderr
    assert "left as it was" in result.stderr and "bug" not in result.stderr
    assert tree(out) == before


def test_check_of_an_unreadable_folder_is_exit_2(open_tmp: Path, old: CompileResult) -> None:
    out = open_tmp / "out"
    emit(old.files, out)
    (out / "status.sh").chmod(0)
    result = run_child("compile", OLD_SPEC, "-o", out, "--check", drop_root=True)
    assert result.returncode == 2, result.stderr
    assert f"cannot read the output folder {out}: Permission denied ({out / 'status.sh'}); make it readable" in (
        result.stderr
    )
    out.chmod(0)  # as its owner, click finds it unreadable first; as root, sparkc does (after dropping root)
    result = run_child("compile", OLD_SPEC, "-o", out, "--check", drop_root=True)
    assert result.returncode == 2, result.stderr
    assert "not readable" in result.stderr or f"cannot read the output folder {out}: Permission denied" in result.stderr
    assert "bug" not in result.stderr


@pytest.mark.usefixtures("no_lint")
def test_folder_below_a_file_is_exit_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    assert main(["compile", str(OLD_SPEC), "-o", str(blocker / "build")]) == 2
    err = capsys.readouterr().err
    assert f"cannot create the output folder {blocker / 'build'}: {blocker} is a file, not a folder" in err
    assert "bug" not in err
    assert main(["compile", str(OLD_SPEC), "-o", str(blocker / "build"), "--check"]) == 1  # nothing there yet


@pytest.mark.usefixtures("no_lint")
def test_folder_where_a_file_goes_is_exit_2_before_anything_moves(
    tmp_path: Path, old: CompileResult, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    emit(old.files, out)
    (out / "logs.sh").unlink()
    (out / "logs.sh").mkdir()
    before = tree(out)
    assert main(["compile", str(NEW_SPEC), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"a folder is where sparkc writes a file ({out / 'logs.sh'}); move it away" in err
    assert tree(out) == before


@pytest.mark.usefixtures("no_lint")
def test_full_disk_is_exit_2_and_leaves_the_folder_as_it_was(
    tmp_path: Path, old: CompileResult, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    emit(old.files, out)
    before = tree(out)
    real_write = os.write
    written: list[int] = []

    def full_after_some(fd: int, data: bytes) -> int:
        if sum(written) > 20000:  # partway through the second file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(real_write(fd, data[:8192]))
        return written[-1]

    monkeypatch.setattr(emit_module.os, "write", full_after_some)
    assert main(["compile", str(NEW_SPEC), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write into the output folder {out}: No space left on device" in err
    assert "free some space" in err and "left as it was" in err and "bug" not in err
    assert tree(out) == before


# -- one complete compile, whatever happens ----------------------------------------------------------------


def test_many_compiles_into_one_folder_leave_one_complete_compile(
    tmp_path: Path, old: CompileResult, new: CompileResult
) -> None:
    """Rounds of 8 compiles that all write at once, each rename slowed unevenly: unlocked, they would interleave."""
    out = tmp_path / "out"
    complete = []
    for result, name in ((old, "old"), (new, "new")):
        emit(result.files, tmp_path / name)
        complete.append(tree(tmp_path / name))
    specs, rounds = [OLD_SPEC, NEW_SPEC] * 4, 3
    env = child_env(slow=0.01) | {"GATE": "1", "ROUNDS": str(rounds)}
    procs = [
        subprocess.Popen(
            child("compile", spec, "-o", out), cwd=PACKAGE_HOME, env=env, stdin=PIPE, stdout=PIPE, bufsize=0, text=True
        )
        for spec in specs
    ]

    def wait_for(line: str) -> None:
        for p in procs:
            assert p.stdout is not None
            while (said := p.stdout.readline()) != line:
                assert said, f"child {p.pid} ended before {line!r}"

    for last in [False] * (rounds - 1) + [True]:
        wait_for("@compiled\n")
        for p in procs:  # the gate
            assert p.stdin is not None
            p.stdin.write("\n")
        wait_for("" if last else "@done\n")
        assert tree(out) in complete
    assert [p.wait(timeout=60) for p in procs] == [0] * len(specs)
    checks = [run_child("compile", spec, "-o", out, "--check").returncode for spec in (OLD_SPEC, NEW_SPEC)]
    assert sorted(checks) == [0, 1], checks


def _old_folder(out: Path, old: CompileResult) -> None:
    """The old compile, with a user's file beside it and a file from an earlier compile that the new one drops."""
    emit(old.files, out)
    (out / "notes.txt").write_text("mine")
    manifest = json.loads((out / "manifest.json").read_text())
    # An earlier sparkc's library, as a compile records it.
    manifest["files"]["lib/sparkc-0.0.9.sh"] = hashlib.sha256(b"echo old\n").hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "lib" / "sparkc-0.0.9.sh").write_text("echo old\n")


def test_sigint_or_sigterm_at_any_point_leave_the_old_or_the_new_compile(
    tmp_path: Path, old: CompileResult, new: CompileResult
) -> None:
    pristine = tmp_path / "pristine"
    _old_folder(pristine, old)
    old_tree = tree(pristine)
    shutil.copytree(pristine, tmp_path / "new")
    emit(new.files, tmp_path / "new")
    new_tree = tree(tmp_path / "new")
    assert "lib/sparkc-0.0.9.sh" not in new_tree and "notes.txt" in new_tree

    out = tmp_path / "out"

    def outcome(on: str, nth: int = 1, delay: float = 0.0, sig: int = signal.SIGINT) -> tuple[int, str]:
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, out)
        proc = subprocess.Popen(
            child("compile", NEW_SPEC, "-o", out),
            cwd=PACKAGE_HOME,
            env=child_env(slow=0.03),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            seen += line.strip() == f"@{on}"
            if seen == nth:
                break
        if delay:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, err
        assert proc.returncode in (0, 130), err
        if proc.returncode == 130:
            assert "interrupted" in err
        state = tree(out)
        assert state in (old_tree, new_tree), sorted(state)
        return proc.returncode, "new" if state == new_tree else "old"

    # While the new files are written: the old compile stays.
    assert outcome("fsync", nth=2) == (130, "old")
    # Once the switch began: it is finished first.
    assert outcome("rename") == (130, "new")
    assert outcome("replace", nth=3) == (130, "new")
    # SIGTERM alike.
    assert outcome("fsync", nth=2, sig=signal.SIGTERM) == (130, "old")
    assert outcome("replace", nth=2, sig=signal.SIGTERM) == (130, "new")
    # Anywhere, measured from the start of the compile over the length of one uninterrupted run.
    shutil.rmtree(out)
    shutil.copytree(pristine, out)
    started = time.monotonic()
    assert run_child("compile", NEW_SPEC, "-o", out, slow=0.03).returncode == 0
    length = time.monotonic() - started
    delays = random.Random(1).sample(range(1, 100), 6)
    for percent in delays:
        outcome("ready", delay=length * percent / 100)


def test_a_switch_killed_outright_is_finished_by_the_next_compile(
    tmp_path: Path, old: CompileResult, new: CompileResult
) -> None:
    out = tmp_path / "out"
    _old_folder(out, old)
    expected = tmp_path / "expected"
    _old_folder(expected, old)
    emit(new.files, expected)
    proc = subprocess.Popen(
        child("compile", NEW_SPEC, "-o", out),
        cwd=PACKAGE_HOME,
        env=child_env(slow=0.03),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    replaced = 0
    for line in proc.stdout:
        replaced += line.strip() == "@replace"
        if replaced == 2:
            proc.kill()
            break
    proc.communicate(timeout=60)
    assert (out / ".sparkc-switch").is_dir()
    assert any("compile again to finish" in d for d in differences(new.files, out))
    emit(old.files, tmp_path / "elsewhere")  # unrelated folders are not affected
    emit(new.files, out)
    assert tree(out) == tree(expected)
