"""What the generated scripts write beside themselves (last-launch.txt, distribute-report.txt, logs/,
bench/ and the files in them) meets links planted in the build folder: each is refused, naming the link,
and the file it points to keeps its bytes (and its mode). Unplanted, each is written anew, under a fresh
name renamed into place."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import with_changes

pytestmark = pytest.mark.security

SOLO = "solo-qwen3-32b.yaml"
VICTIM = "the user's own\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the build folder, which a planted link points to: it must keep its bytes and mode."""
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM)
    path.chmod(0o600)
    return path


def untouched(victim: Path) -> bool:
    return victim.read_text() == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o600


def launched(fake: FakeCluster) -> None:
    fake.compile(fake.adapt(SOLO))
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 0, launch.stdout + launch.stderr


@pytest.mark.parametrize("name", ["last-launch.txt", "logs"])
def test_launch_refuses_a_link_where_it_records_before_any_node_is_touched(
    fake: FakeCluster, victim: Path, name: str
) -> None:
    fake.compile(fake.adapt(SOLO))
    (fake.build / name).symlink_to(victim)
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 1
    assert f"{fake.build / name} is a symbolic link, where this script writes" in launch.stderr
    assert untouched(victim) and fake.docker_calls() == []


def test_the_launch_record_is_a_new_file_each_time(fake: FakeCluster, victim: Path) -> None:
    """A hard link to the user's file at last-launch.txt: a write into the file would change it too."""
    fake.compile(fake.adapt(SOLO))
    (fake.build / "last-launch.txt").hardlink_to(victim)
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "state=ready" in (fake.build / "last-launch.txt").read_text()
    assert untouched(victim)


def test_distribute_refuses_a_linked_report(fake: FakeCluster, victim: Path) -> None:
    fake.compile(fake.adapt(SOLO))
    (fake.build / "distribute-report.txt").symlink_to(victim)
    run = fake.run("distribute.sh", "--image-only")
    assert run.returncode == 1
    assert f"{fake.build / 'distribute-report.txt'} is a symbolic link" in run.stderr
    assert untouched(victim)


def test_logs_refuses_a_linked_logs_folder(fake: FakeCluster, tmp_path: Path) -> None:
    launched(fake)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (fake.build / "logs").symlink_to(elsewhere)
    run = fake.run("logs.sh")
    assert run.returncode == 1 and f"{fake.build / 'logs'} is a symbolic link" in run.stderr
    assert list(elsewhere.iterdir()) == []


def test_logs_never_writes_through_a_link_in_the_folder_it_is_given(fake: FakeCluster, victim: Path) -> None:
    launched(fake)
    out = fake.build / "gathered"
    out.mkdir()
    head = (fake.state / "head").read_text().strip()
    (out / f"{head}.log").symlink_to(victim)
    fake.run("logs.sh", "--out", str(out))
    assert untouched(victim)


def test_bench_never_writes_through_a_link(fake: FakeCluster, tmp_path: Path, victim: Path) -> None:
    launched(fake)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (fake.build / "bench").symlink_to(elsewhere)
    run = fake.run("bench.sh", "--concurrency", "1", "--prompts", "2")
    assert run.returncode == 1 and f"{fake.build / 'bench'} is a symbolic link" in run.stderr
    assert list(elsewhere.iterdir()) == []
    for name in ("concurrency-1.log", "summary.json"):
        out = tmp_path / name.replace(".", "-")
        out.mkdir()
        (out / name).symlink_to(victim)
        run = fake.run("bench.sh", "--concurrency", "1", "--prompts", "2", "--out", str(out))
        assert run.returncode != 0 and f"{out / name} is a symbolic link" in run.stderr
        assert untouched(victim)


def test_the_helpers_write_anew_and_refuse_links(fake: FakeCluster, tmp_path: Path, victim: Path) -> None:
    """save_file and new_folder of the library, on their own."""
    fake.compile(fake.adapt(SOLO))
    library = next((fake.build / "lib").glob("sparkc-*.sh"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "linked").symlink_to(victim)
    (folder / "plain").write_text("old\n")
    program = (
        'source "$1"; cd "$2"; echo new | save_file "$2/plain"; echo x | save_file "$2/linked"; echo "rc=$?"; '
        'new_folder "$2/linked" sub; echo "rc=$?"; new_folder "$2" sub && new_folder "$2" sub && '
        'echo "$SPARKC_NEW_FOLDER"'
    )
    done = subprocess.run(
        ["bash", "-c", program, "bash", str(library), str(folder)], capture_output=True, text=True, timeout=30
    )
    assert (folder / "plain").read_text() == "new\n" and untouched(victim)
    assert done.stdout.splitlines()[:2] == ["rc=1", "rc=1"], done.stdout + done.stderr
    assert f"{folder / 'linked'} is a symbolic link, where this script writes a file" in done.stderr
    assert f"{folder / 'linked'} is a symbolic link, where this script writes a folder" in done.stderr
    assert done.stdout.splitlines()[2].startswith(f"{folder}/sub.")  # the second one, beside the first
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("sub")) == ["linked", "plain"]


def test_the_report_files_are_written_as_before(fake: FakeCluster) -> None:
    """The failure logs of a launch: a new folder under logs/, each node's log and the failure in it."""
    fake.compile(with_changes(fake.adapt(SOLO), {}))
    fake.set("crash")
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 1
    [folder] = (fake.build / "logs").iterdir()
    assert (folder / "failure.txt").read_text().startswith("phase=")
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in folder.iterdir())
