"""`sparkc import --recipes-dir`: spark-vllm-docker's mods (a folder of the recipe's repository with a
run.sh) carried as container.hooks: their files in a patch folder beside the spec, a pre_engine command per
mod that does what the recipe's launcher does (copy to /workspace/mods/NAME, run run.sh there). The
compiled output ships them; run by sh, a mod's hook puts its file where the engine's command names it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from compiler.plan import PATCHES_MOUNT
from compiler.tools.recipe_mods import MOD_HOME
from tests.product import run_sparkc

RECIPE = """\
name: Demo-Chat-Template
model: org/demo
container: vllm-node
mods:
  - mods/fix-chat-template
  - mods/fix-parser/
defaults: {port: 8000, host: 0.0.0.0, tensor_parallel: 1}
command: |
  vllm serve org/demo --port {port} --host {host} -tp {tensor_parallel}
    --chat-template unsloth.jinja --reasoning-parser-plugin demo_parser.py
"""


def repository(root: Path) -> Path:
    """A checkout of the recipe's repository with its two mods, as spark-vllm-docker lays them out."""
    chat = root / "mods" / "fix-chat-template"
    chat.mkdir(parents=True)
    (chat / "run.sh").write_text('#!/bin/sh\nset -e\ncp chat_template.jinja "$WORKSPACE_DIR/unsloth.jinja"\n')
    (chat / "chat_template.jinja").write_text("{{ messages }}\n")
    parser = root / "mods" / "fix-parser"
    (parser / "src").mkdir(parents=True)
    # As the public mods do: move to the workspace, then write the file there (from the mod's own folder).
    (parser / "run.sh").write_text(
        '#!/bin/sh\nset -e\nmod=$(pwd)\ncd "$WORKSPACE_DIR"\ncp "$mod/src/demo_parser.py" demo_parser.py\n'
    )
    (parser / "src" / "demo_parser.py").write_text("PARSER = 'demo'\n")
    (root / "recipes").mkdir()
    (root / "recipes" / "demo.yaml").write_text(RECIPE)
    return root


def imported(tmp_path: Path) -> tuple[Path, dict]:
    repo = repository(tmp_path / "repo")
    out = tmp_path / "deploy" / "demo.yaml"
    out.parent.mkdir()
    done = run_sparkc("import", repo / "recipes" / "demo.yaml", "--recipes-dir", repo, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "mods.0" not in done.stderr and "wrote" in done.stderr
    return out, YAML(typ="safe").load(out.read_text())


def test_mods_become_hooks_with_their_files_beside_the_spec(tmp_path: Path) -> None:
    out, spec = imported(tmp_path)
    hooks = spec["container"]["hooks"]
    assert hooks["patches"] == "demo-mods"
    assert hooks["pre_engine"] == [
        f'export WORKSPACE_DIR="$PWD" && mkdir -p {MOD_HOME} && cp -R {PATCHES_MOUNT}/{name} {MOD_HOME}/ '
        f"&& cd {MOD_HOME}/{name} && chmod +x run.sh && ./run.sh"
        for name in ("fix-chat-template", "fix-parser")
    ]
    folder = out.parent / "demo-mods"
    written = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert written == [
        "fix-chat-template/chat_template.jinja",
        "fix-chat-template/run.sh",
        "fix-parser/run.sh",
        "fix-parser/src/demo_parser.py",
    ]
    # The command keeps the files the mods make; nothing is lost, so no error and no spec left unwritten.
    assert "unsloth.jinja" in spec["engine"]["args"] and "demo_parser.py" in spec["engine"]["args"]


def test_the_imported_spec_compiles_and_ships_the_mods(tmp_path: Path) -> None:
    out, _ = imported(tmp_path)
    spec = YAML(typ="safe").load(out.read_text())  # the placeholders replaced, as docs/recipes.md says to
    spec["model"]["path"] = "/models/demo"
    for i, node in enumerate(spec["cluster"]["nodes"]):
        node["ssh"] = f"10.0.0.{i + 1}"
        node["fabric"] = {"ip": f"10.1.0.{i + 1}", "netdev": "enp1s0f0np0", "hcas": ["rocep1s0f0"]}
    out.write_text(json.dumps(spec))
    build = tmp_path / "build"
    done = run_sparkc("compile", out, "-o", build)
    assert done.returncode == 0, done.stdout + done.stderr
    shipped = build / "patches" / "fix-parser" / "src" / "demo_parser.py"
    assert shipped.read_text() == "PARSER = 'demo'\n"
    manifest = json.loads((build / "manifest.json").read_text())
    assert "fix-chat-template/run.sh" in json.dumps(manifest)


def test_a_mods_hook_run_by_sh_puts_its_file_where_the_command_names_it(tmp_path: Path) -> None:
    """The hooks as the container's sh runs them, in the image's working folder (where the engine then
    resolves `--chat-template unsloth.jinja`), with the patch mount and /workspace under a temporary root
    and no WORKSPACE_DIR in the container's environment: the hook itself gives the mod the one its
    launcher gives it."""
    out, spec = imported(tmp_path)
    root = tmp_path / "container"
    (root / "sparkc").mkdir(parents=True)
    (root / PATCHES_MOUNT.lstrip("/")).symlink_to(out.parent / "demo-mods")
    workspace = root / "workspace"
    workdir = workspace / "vllm"  # spark-vllm-docker's image works in /workspace/vllm
    workdir.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "WORKSPACE_DIR"}
    for command in spec["container"]["hooks"]["pre_engine"]:
        moved = command.replace(PATCHES_MOUNT, str(root / PATCHES_MOUNT.lstrip("/"))).replace(
            "/workspace", str(workspace)
        )
        subprocess.run(["sh", "-c", moved], check=True, env=env, cwd=workdir)
    assert (workdir / "unsloth.jinja").read_text() == "{{ messages }}\n"
    assert (workdir / "demo_parser.py").read_text() == "PARSER = 'demo'\n"
    assert (workspace / "mods" / "fix-parser" / "run.sh").is_file()
    # Each name the engine's command gives by a relative path is now in its working folder.
    named = [w for w in spec["engine"]["args"] if w.endswith((".jinja", ".py"))]
    assert named and all((workdir / name).is_file() for name in named)


def _import_with(tmp_path: Path, change) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    repo = repository(tmp_path / "repo")
    change(repo)
    out = tmp_path / "demo.yaml"
    return run_sparkc("import", repo / "recipes" / "demo.yaml", "--recipes-dir", repo, "-o", out)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: (r / "mods" / "fix-parser" / "run.sh").unlink(), "mods.1: the mod mods/fix-parser/ (read in"),
        (lambda r: (r / "mods" / "fix-parser" / "run.sh").unlink(), "has no run.sh: a spark-vllm-docker mod is"),
        (lambda r: (r / "mods" / "fix-parser" / "blob.bin").write_bytes(b"\xff\xfe\x00"), "not UTF-8 text"),
        (lambda r: (r / "mods" / "fix-parser" / "id_rsa").write_text("k"), "named like a key"),
        (
            lambda r: (r / "recipes" / "demo.yaml").write_text(RECIPE.replace("mods/fix-parser/", "../outside")),
            "leads out of the",
        ),
        (
            lambda r: (r / "recipes" / "demo.yaml").write_text(RECIPE.replace("mods/fix-parser/", "mods/p.zip")),
            "is a zip file: unzip it",
        ),
        (
            lambda r: (r / "recipes" / "demo.yaml").write_text(RECIPE.replace("mods/fix-parser/", "mods/gone")),
            "does not exist",
        ),
    ],
)
def test_a_mod_that_cannot_be_carried_is_an_error_at_its_line(tmp_path: Path, change, message: str) -> None:
    done = _import_with(tmp_path, change)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert "demo.yaml:6:5: error: mods.1:" in done.stderr and "no spec written" in done.stderr
    assert not (tmp_path / "demo.yaml").exists() and not (tmp_path / "demo-mods").exists()


def test_without_the_repository_or_an_output_file_it_says_what_to_give(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    recipe = repo / "recipes" / "demo.yaml"
    lost = run_sparkc("import", recipe, "-o", tmp_path / "a.yaml")
    assert lost.returncode == 1 and "puts into the container: give the recipe's repository" in lost.stderr
    assert "with --recipes-dir" in lost.stderr
    stdout = run_sparkc("import", recipe, "--recipes-dir", repo)
    assert stdout.returncode == 1 and "give the spec's file with -o SPEC" in stdout.stderr
    (tmp_path / "b-mods").mkdir()
    taken = run_sparkc("import", recipe, "--recipes-dir", repo, "-o", tmp_path / "b.yaml")
    assert taken.returncode == 2 and "b-mods exists; sparkc import never overwrites" in taken.stderr
    assert not (tmp_path / "b.yaml").exists()
