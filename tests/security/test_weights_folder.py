"""The weights folder is data. The node-side checks read it under the node's sh: its .git must never
become a program (a ref `X||e;#` made `sed -n "s| $ref\\$||p"` GNU sed's execute flag, which ran the
lines of packed-refs), never name a file out of it whose text is then shown, and a link in it must not
send the walk over the node's whole disk (`find -L` followed `rootfs -> /`). Run with the real tools
(GNU sed, find, awk) under every shell a node may have, and through the launcher's preflight."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.product import needs

pytestmark = pytest.mark.security

NODE = Path(__file__).resolve().parents[2] / "runtime" / "node"
FACTS = (NODE / "model-facts.sh").read_text(encoding="utf-8")
PREFLIGHT = (NODE / "preflight.sh").read_text(encoding="utf-8")
SHELLS = [("bash",), ("dash",), ("zsh",), ("busybox", "sh")]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run_sh(shell: tuple[str, ...], script: str, *args: str, path: str | None = None) -> tuple[str, float]:
    """`SHELL -c SCRIPT sh ARGS...`, as the node runs it: its output and how long it took (at most 15 s)."""
    needs(shutil.which(shell[0]) is None, f"{shell[0]} is not installed")
    env = dict(os.environ, LC_ALL="C", **({"PATH": path} if path else {}))
    start = time.monotonic()
    proc = subprocess.run([*shell, "-c", script, "sh", *args], capture_output=True, text=True, timeout=15, env=env)
    return proc.stdout, time.monotonic() - start


def facts(shell: tuple[str, ...], folder: Path) -> str:
    return run_sh(shell, FACTS, str(folder), "", "")[0]


def git_folder(root: Path, head: str, packed: str = "") -> Path:
    folder = root / "weights"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text(head, encoding="utf-8")
    if packed:
        (folder / ".git" / "packed-refs").write_text(packed, encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"w" * 10)
    return folder


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_ref_never_becomes_a_sed_program(shell: tuple[str, ...], tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    folder = git_folder(tmp_path, "ref: X||e;#\n", f"touch {canary} X\n{COMMIT} refs/heads/main\n")
    out = facts(shell, folder)
    assert not canary.exists(), "a line of packed-refs ran"
    assert "git" not in out  # not a ref git would write: no revision is read from it


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_ref_that_climbs_out_shows_no_other_files_text(shell: tuple[str, ...], tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the text of another file\n", encoding="utf-8")
    climb = "../" * 30 + str(secret).lstrip("/")
    out = facts(shell, git_folder(tmp_path, f"ref: {climb}\n"))
    assert "another file" not in out and "git" not in out


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_ref_file_that_links_elsewhere_gives_no_text_but_a_commit(shell: tuple[str, ...], tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the text of another file\n", encoding="utf-8")
    folder = git_folder(tmp_path, "ref: refs/heads/main\n")
    (folder / ".git" / "refs" / "heads").mkdir(parents=True)
    (folder / ".git" / "refs" / "heads" / "main").symlink_to(secret)
    assert facts(shell, folder).splitlines()[0] == "git unknown main"


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_packed_refs_fifo_does_not_block(shell: tuple[str, ...], tmp_path: Path) -> None:
    folder = git_folder(tmp_path, "ref: refs/heads/main\n")
    os.mkfifo(folder / ".git" / "packed-refs")
    assert facts(shell, folder).splitlines()[0] == "git unknown main"


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_git_checkout_still_says_its_commit_and_branch(shell: tuple[str, ...], tmp_path: Path) -> None:
    packed = git_folder(
        tmp_path / "packed", "ref: refs/heads/release/v1.2\n", f"# pack-refs\n{COMMIT} refs/heads/release/v1.2\n"
    )
    assert facts(shell, packed).splitlines() == [f"git {COMMIT} release/v1.2"]
    loose = git_folder(tmp_path / "loose", "ref: refs/heads/main\n")
    (loose / ".git" / "refs" / "heads").mkdir(parents=True)
    (loose / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n", encoding="utf-8")
    assert facts(shell, loose).splitlines() == [f"git {COMMIT} main"]
    detached = git_folder(tmp_path / "detached", COMMIT + "\n")
    assert facts(shell, detached).splitlines() == [f"git {COMMIT}"]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_hugging_face_ref_that_is_no_commit_is_not_a_folder_to_walk(shell: tuple[str, ...], tmp_path: Path) -> None:
    """refs/main holding `../../..` made the snapshot folder `/`, which the look for dangling links walked."""
    repo = tmp_path / "models--org--name"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("../../../../../../../../..\n", encoding="utf-8")
    out, took = run_sh(shell, FACTS, str(repo), "main", "ref")
    assert out.splitlines() == [f"noref {repo}/refs/main"] and took < 5


# -- the file list preflight compares across nodes ------------------------------------------------------


def model_files(shell: tuple[str, ...], folder: Path, path: str | None = None) -> tuple[list[str], float]:
    out, took = run_sh(shell, PREFLIGHT + "\ncheck_model\n", f"model={folder}", path=path)
    return out.splitlines(), took


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_a_link_to_the_root_is_not_walked(shell: tuple[str, ...], tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    (folder / "snapshots" / "abc").mkdir(parents=True)
    (folder / "blobs").mkdir()
    (folder / "blobs" / "123").write_bytes(b"w" * 1234)
    (folder / "snapshots" / "abc" / "model.safetensors").symlink_to("../../blobs/123")
    (folder / "rootfs").symlink_to("/")
    (folder / "null").symlink_to("/dev/null")
    lines, took = model_files(shell, folder)
    assert sorted(lines) == [
        "model_dir yes",
        "model_file 1234 ./blobs/123",
        "model_file 1234 ./snapshots/abc/model.safetensors",  # a link to a file: the file's size
    ]
    assert took < 10


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_the_list_is_cut_at_20000_files_and_says_so(shell: tuple[str, ...], tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    for i in range(20_001):
        (folder / f"f{i}").touch()
    lines, _ = model_files(shell, folder)
    assert lines[-1] == "model_cut files"
    assert len([line for line in lines if line.startswith("model_file ")]) <= 20_000


SLOW_FIND = """#!/bin/sh
# find on a file system that stops answering (a hung network mount): one entry, then nothing.
echo 81a4 1 ./first
exec sleep 60
"""


def test_a_walk_that_stalls_is_cut_after_10_seconds_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "find").write_text(SLOW_FIND, encoding="utf-8")
    (tmp_path / "bin" / "find").chmod(0o755)
    (tmp_path / "weights").mkdir()
    lines, took = model_files(("dash",), tmp_path / "weights", path=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert lines == ["model_dir yes", "model_file 1 ./first", "model_cut time"]
    assert took < 13


def test_the_launcher_says_the_list_was_cut_and_compares_no_cut_list(fake: FakeCluster) -> None:
    spec = fake.adapt("llama33-70b-2spark-native")
    folder = Path(spec["model"]["path"])
    for i in range(20_001):
        (folder / f"f{i}").touch()
    fake.compile(spec)
    result = fake.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "holds over 20000 files; the list was cut there" in result.stdout + result.stderr
    assert "differs from" not in result.stdout + result.stderr


@pytest.mark.parametrize("shell", SHELLS[1:], ids=lambda s: s[0])
def test_the_launchers_preflight_runs_no_line_of_the_weights_folder(
    fake: FakeCluster, tmp_path: Path, shell: tuple[str, ...]
) -> None:
    """The same .git through the whole preflight: the head's sh and a worker that logs in with each shell."""
    needs(shutil.which(shell[0]) is None, f"{shell[0]} is not installed")
    canary = tmp_path / "pwned"
    spec = fake.adapt("llama33-70b-2spark-native")
    folder = Path(spec["model"]["path"])
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: X||e;#\n", encoding="utf-8")
    (folder / ".git" / "packed-refs").write_text(f"touch {canary} X\n", encoding="utf-8")
    fake.login_shell("spark-b", *shell)
    fake.compile(spec)
    result = fake.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not canary.exists()
