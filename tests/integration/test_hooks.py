"""container.hooks: pre_engine commands run inside every container before the engine, by a fixed runner
(never on the host); a patch folder beside the spec is copied out, mounted read-only and hashed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from compiler.pipeline import Beside, compile_text
from compiler.plan import PATCHES_MOUNT, PATCHES_PLACEHOLDER
from compiler.resolve.hooks import RUNNER
from tests.specs import container_command, diagnostics_text, docker_run_words, dump, example, node_plan, with_changes

HOOKS = ["pip install --no-deps /sparkc/patches/fix.whl || true", 'echo "$(hostname)" > /tmp/x; exit 0']


def compile_with(folder: Path, spec: dict[str, object]):
    return compile_text(dump(spec), "spec.yaml", beside=Beside(spec_dir=folder))


def patches(folder: Path) -> Path:
    (folder / "mods" / "sub").mkdir(parents=True)
    (folder / "mods" / "fix.py").write_text("print('patched')\n")
    (folder / "mods" / "sub" / "a.patch").write_text("--- a\n+++ b\n")
    return folder


@pytest.mark.parametrize(
    "name", ["llama33-70b-2spark-native", "seed-qwen35-122b-2spark-ray", "sglang-qwen3-30b-2spark", "solo-qwen3-32b"]
)
def test_hooks_run_before_what_the_container_would_run(name: str, tmp_path: Path) -> None:
    plain = compile_with(tmp_path, example(name))
    hooked = compile_with(tmp_path, with_changes(example(name), {"container.hooks.pre_engine": HOOKS}))
    assert hooked.ok, diagnostics_text(hooked)
    assert plain.plan is not None and hooked.plan is not None
    for before, after in zip(plain.plan.nodes, hooked.plan.nodes, strict=True):
        words, old = docker_run_words(after), docker_run_words(before)
        image = words.index(hooked.plan.image)
        tail = words[image + 1 :]
        runner = ("-c", RUNNER, "sparkc-hooks", str(len(HOOKS)), *HOOKS)
        # sh runs the runner, which then execs exactly what the container ran before (entrypoint included).
        if "--entrypoint" in words:
            assert words[words.index("--entrypoint") + 1] == "sh"
            assert tail[: len(runner)] == runner
            rest = tail[len(runner) :]
            old_entry = (
                old[old.index("--entrypoint") + 1 : old.index("--entrypoint") + 2] if "--entrypoint" in old else ()
            )
            if old_entry:
                assert rest == (*old_entry, *old[old.index(plain.plan.image) + 1 :])
        else:
            assert tail[: len(runner) + 1] == ("sh", *runner)
            assert tail[len(runner) + 1 :] == old[old.index(plain.plan.image) + 1 :]


def test_hook_text_reaches_the_container_as_one_word_and_runs_there(tmp_path: Path) -> None:
    """The runner, run by a real sh with the words docker would pass, runs each hook by sh -c and then the program."""
    result = compile_with(tmp_path, with_changes(example("solo-qwen3-32b"), {"container.hooks.pre_engine": HOOKS}))
    assert result.plan is not None
    words = container_command(result.plan, "spark-a")
    out = tmp_path / "ran"
    hooks = [f"printf '%s|' \"$0\" > {out}", 'echo "a b;$(echo c)" >> ' + str(out)]
    run = subprocess.run(
        ["sh", "-c", RUNNER, "sparkc-hooks", "2", *hooks, "echo", "engine"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.endswith("sparkc: hooks done\nengine\n"), run.stdout + run.stderr
    assert out.read_text() == "sh|a b;c\n"
    assert HOOKS[1] in words  # one word, byte for byte


def test_a_failing_hook_stops_with_its_name_and_never_starts_the_program() -> None:
    run = subprocess.run(
        ["sh", "-c", RUNNER, "sparkc-hooks", "2", "true", "exit 3", "echo", "ENGINE-RAN"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 97 and "ENGINE-RAN" not in run.stdout
    assert "sparkc: hook pre_engine[1] failed with status 3: exit 3" in run.stderr


def test_patch_folder_is_copied_mounted_and_hashed(tmp_path: Path) -> None:
    spec = with_changes(
        example("llama33-70b-2spark-native"), {"container.hooks": {"pre_engine": HOOKS, "patches": "mods"}}
    )
    result = compile_with(patches(tmp_path), spec)
    assert result.ok, diagnostics_text(result)
    assert result.files["patches/fix.py"] == "print('patched')\n"
    assert result.files["patches/sub/a.patch"] == "--- a\n+++ b\n"
    assert ("-v", f"{PATCHES_PLACEHOLDER}:{PATCHES_MOUNT}:ro") in node_plan(result.plan, "spark-b").docker_run
    hooks = json.loads(result.files["manifest.json"])["plan"]["hooks"]
    assert [f["path"] for f in hooks["patches"]] == ["fix.py", "sub/a.patch"]
    again = compile_with(tmp_path, spec)
    assert again.files["manifest.json"] == result.files["manifest.json"]
    (tmp_path / "mods" / "fix.py").write_text("print('other')\n")
    changed = json.loads(compile_with(tmp_path, spec).files["manifest.json"])["plan"]["hooks"]
    assert changed["patches_sha256"] != hooks["patches_sha256"]
    assert changed["pre_engine_sha256"] == hooks["pre_engine_sha256"]


def test_dry_run_shows_the_copy_and_the_mount_on_each_node(tmp_path: Path) -> None:
    spec = with_changes(
        example("llama33-70b-2spark-native"), {"container.hooks": {"pre_engine": HOOKS, "patches": "mods"}}
    )
    result = compile_with(patches(tmp_path), spec)
    out = tmp_path / "out"
    out.mkdir()
    for name, text in result.files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    run = subprocess.run(
        ["bash", str(out / "launch-cluster.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HF_TOKEN": "x"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"-v {out}/patches:/sparkc/patches:ro" in run.stdout
    assert "tar -C" in run.stdout and "sparkc-hooks" in run.stdout


@pytest.mark.parametrize(
    ("setup", "changes", "message"),
    [
        ("", {"container.hooks.patches": "nowhere"}, "the patch folder nowhere does not exist beside the spec"),
        ("empty", {"container.hooks.patches": "empty"}, "the patch folder empty is empty"),
        ("hidden", {"container.hooks.patches": "hidden"}, "hidden/.git: hidden files"),
        ("binary", {"container.hooks.patches": "binary"}, "binary/x.bin: not UTF-8 text"),
        ("", {"container.hooks.pre_engine": [""]}, "must not be empty"),
        ("", {"container.hooks.pre_engine": ["echo a\necho b"]}, "control characters"),
        (
            "mods",
            {"container.hooks.patches": "mods", "container.mounts": [{"host": "/x", "container": "/sparkc/patches"}]},
            "/sparkc/patches is where",
        ),
    ],
)
def test_hooks_are_validated(tmp_path: Path, setup: str, changes: dict[str, object], message: str) -> None:
    if setup == "mods":
        patches(tmp_path)
    elif setup:
        (tmp_path / setup).mkdir()
    if setup == "hidden":
        (tmp_path / "hidden" / ".git").write_text("x")
    if setup == "binary":
        (tmp_path / "binary" / "x.bin").write_bytes(b"\xff\xfe")
    result = compile_with(tmp_path, with_changes(example("solo-qwen3-32b"), changes))
    assert not result.ok and message in diagnostics_text(result), diagnostics_text(result)
