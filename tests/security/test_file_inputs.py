"""Every file sparkc reads from the user's disk, as something other than a small regular file: a FIFO,
a device, a huge (sparse) file, a link, a name that is not UTF-8, and the patch folder aimed elsewhere.
Each is refused with a clear message (exit 2 for a file that cannot be read at all, 1 for a spec
problem at its file:line:col); none hangs, none exits 3, none reads more than its limit.

The cases that could hang run sparkc as a child with a timeout: a regression fails, it cannot stall the
suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.cli.main import main
from tests.specs import EXAMPLES, ROOT, dump, example, with_changes

pytestmark = pytest.mark.security

SEED = EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml"
NATIVE = "llama33-70b-2spark-native"
HUGE = 3 * 1024**3  # sparse: takes no disk, reads as zeros


def sparkc(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARKC_DEBUG", None)
    try:
        return subprocess.run(
            [sys.executable, "-m", "compiler", *map(str, argv)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"sparkc {' '.join(map(str, argv))} hung")


def spec_beside(folder: Path, changes: dict[str, object] | None = None, name: str = NATIVE) -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(dump(with_changes(example(name), changes or {})))
    return spec


# -- the spec itself -----------------------------------------------------------------------------------------


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", ["validate", "compile", "explain"])
def test_a_fifo_as_the_spec_is_refused_at_once(tmp_path: Path, command: str) -> None:
    make_fifo(tmp_path / "spec.yaml")
    done = sparkc(command, "spec.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "spec.yaml: a named pipe (FIFO), not a plain file" in done.stderr


def test_a_link_to_a_fifo_as_the_spec_is_refused(tmp_path: Path) -> None:
    make_fifo(tmp_path / "pipe")
    (tmp_path / "spec.yaml").symlink_to(tmp_path / "pipe")
    done = sparkc("compile", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "named pipe" in done.stderr


def test_a_device_as_the_spec_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "/dev/zero", "-o", str(tmp_path / "out")]) == 2
    assert "/dev/zero: a device, not a plain file" in capsys.readouterr().err


def test_a_huge_spec_is_refused_without_reading_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    with spec.open("wb") as f:
        f.truncate(HUGE)
    assert main(["validate", str(spec)]) == 2
    assert "larger than 1 MiB" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["validate", "compile"])
def test_a_spec_name_that_is_not_utf8_is_refused(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = Path(os.fsdecode(bytes(tmp_path) + b"/sp\xffec.yaml"))
    spec.write_bytes(SEED.read_bytes())
    assert main([command, str(spec), *(["-o", str(tmp_path / "out")] if command == "compile" else [])]) == 2
    assert "sp\\xffec.yaml: the file name is not UTF-8" in capsys.readouterr().err


# -- what the spec names beside it --------------------------------------------------------------------------------


def test_a_fifo_among_own_profiles_is_refused(tmp_path: Path) -> None:
    spec_beside(tmp_path)
    (tmp_path / "profiles").mkdir()
    make_fifo(tmp_path / "profiles" / "mine.yaml")
    done = sparkc("validate", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 1 and "profiles/mine.yaml: a named pipe (FIFO)" in done.stderr


def test_a_fifo_as_the_cluster_file_is_refused_at_the_spec(tmp_path: Path) -> None:
    spec = example(NATIVE)
    spec["cluster"] = {"file": "cluster.yaml"}
    (tmp_path / "spec.yaml").write_text(dump(spec))
    make_fifo(tmp_path / "cluster.yaml")
    done = sparkc("validate", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert re.search(r"spec\.yaml:\d+:\d+: cluster\.file: .*cannot read the cluster file: .*named pipe", done.stderr)


@pytest.mark.parametrize("what", ["fifo", "device", "huge"])
def test_a_model_index_that_is_no_plain_file_is_not_read(tmp_path: Path, what: str) -> None:
    model = tmp_path / "model"
    model.mkdir()
    index = model / "model.safetensors.index.json"
    if what == "fifo":
        make_fifo(index)
    elif what == "device":
        index.symlink_to("/dev/zero")
    else:
        with index.open("wb") as f:
            f.truncate(HUGE)
    spec_beside(tmp_path, {"model.path": str(model)})
    done = sparkc("validate", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # the weights' size is then unknown: nothing else changes


# -- the patch folder ---------------------------------------------------------------------------------------------

PATCHES_AT = re.compile(r"spec\.yaml:\d+:\d+: container\.hooks\.patches: ")


def hooks_spec(folder: Path, patches: str) -> Path:
    return spec_beside(folder, {"container.hooks": {"pre_engine": ["sh /sparkc/patches/a.sh"], "patches": patches}})


def refusal(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["compile", str(folder / "spec.yaml"), "-o", str(folder / "out")]) == 1
    err = capsys.readouterr().err
    assert PATCHES_AT.search(err), err
    assert not (folder / "out").exists()
    return err


@pytest.mark.parametrize(
    ("patches", "message"),
    [
        ("/etc/ssh", "is not relative to the spec's folder"),
        ("~/.ssh", "is not relative to the spec's folder"),
        ("../outside", "leads out of the spec's folder (..)"),
        ("mods/../../outside", "leads out of the spec's folder (..)"),
        ("link", "leads out of the spec's folder through a link"),
    ],
)
def test_the_patch_folder_stays_beside_the_spec(
    tmp_path: Path, patches: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "mods").mkdir(parents=True)
    outside.mkdir()
    (outside / "a.sh").write_text("echo hi\n")
    (project / "link").symlink_to(outside)
    hooks_spec(project, patches)
    assert message in refusal(project, capsys)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("id_ed25519", "not really a key\n", "named like a key"),
        ("ssh_host_rsa_key", "x\n", "named like a key"),
        ("server.pem", "x\n", "named like a key"),
        ("notes.txt", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n", "key"),
        ("a.patch", "+-----BEGIN RSA PRIVATE KEY-----\n", "a private key"),
        ("b.txt", "-----BEGIN PRIVATE KEY-----\n", "a private key"),
        ("c.txt", "-----BEGIN EC PRIVATE KEY-----\n", "a private key"),
        ("d.ppk", "PuTTY-User-Key-File-3: ssh-ed25519\n", "named like a key"),
    ],
)
def test_key_like_files_never_ride_along(
    tmp_path: Path, name: str, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "a.sh").write_text("echo hi\n")
    (tmp_path / "mods" / name).write_text(text)
    hooks_spec(tmp_path, "mods")
    assert f"mods/{name}: " in (err := refusal(tmp_path, capsys)) and message in err


def test_a_public_key_is_no_private_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "a.sh").write_text("echo hi\n")
    (tmp_path / "mods" / "id_ed25519.pub").write_text("ssh-ed25519 AAAA user@host\n")
    hooks_spec(tmp_path, "mods")
    assert main(["validate", str(tmp_path / "spec.yaml")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("what", ["fifo", "device", "huge", "many", "deep"])
def test_the_patch_folder_is_bounded_and_plain(tmp_path: Path, what: str) -> None:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "a.sh").write_text("echo hi\n")
    if what == "fifo":
        make_fifo(mods / "b.patch")
    elif what == "device":
        (mods / "b.patch").symlink_to("/dev/zero")
    elif what == "huge":
        with (mods / "b.patch").open("wb") as f:
            f.truncate(HUGE)
    elif what == "many":
        for i in range(300):
            (mods / f"{i}.patch").write_text("x\n")
    else:
        for i in range(1100):
            (mods / f"d{i}").mkdir()
    hooks_spec(tmp_path, "mods")
    done = sparkc("validate", "spec.yaml", cwd=tmp_path)
    assert done.returncode == 1 and PATCHES_AT.search(done.stderr), done.stderr
    expected = {
        "fifo": "mods/b.patch: only plain files and folders can be copied, not links, pipes or devices",
        "device": "mods/b.patch: only plain files and folders can be copied",
        "huge": "the patch folder would hold over 4 MiB",
        "many": "mods holds over 256 files",
        "deep": "mods holds over 1024 files and folders",
    }[what]
    assert expected in done.stderr


# -- files sparkc writes beside the user's ---------------------------------------------------------------------


def test_import_never_overwrites_a_file_nor_writes_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = ROOT / "tests" / "recipes" / "sparkrun-style.yaml"  # one that imports: a spec is written
    mine = tmp_path / "spec.yaml"
    mine.write_text("mine\n")
    assert main(["import", str(recipe), "-o", str(mine)]) == 2
    assert "never overwrites a file" in capsys.readouterr().err and mine.read_text() == "mine\n"
    elsewhere = tmp_path / "elsewhere.txt"
    (tmp_path / "link.yaml").symlink_to(elsewhere)  # dangling: a write through it would create elsewhere.txt
    assert main(["import", str(recipe), "-o", str(tmp_path / "link.yaml")]) == 2
    assert not elsewhere.exists()
    assert main(["import", str(recipe), "-o", str(tmp_path / "new.yaml")]) == 0
    assert "PLACEHOLDER" in (tmp_path / "new.yaml").read_text()


@pytest.mark.parametrize(("data", "message"), [(None, "is over"), (b"\xff\xfe{}", "cannot read the inspect output")])
def test_profile_inspect_output_is_bounded_and_decoded(
    tmp_path: Path, data: bytes | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path("/dev/zero") if data is None else tmp_path / "inspect.json"
    if data is not None:
        path.write_bytes(data)
    assert main(["profile", "example/image:1", "--inspect", str(path)]) == 2
    assert message in capsys.readouterr().err
