"""What `pip install .` gives a user: the wheel holds the whole tree, and README's quick start works as
written, from a fresh virtual environment, in a copy of the tree that is not this checkout."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.readme_commands import section
from tests.specs import EXAMPLES, ROOT

# Where each folder of the tree lands in the wheel.
PACKAGED = {"compiler": "compiler", "templates": "compiler/templates", "runtime": "compiler/runtime",
            "schemas": "compiler/schemas", "profiles": "compiler/profiles",
            "flag_tables": "compiler/flag_tables"}  # fmt: skip
# The runtime's own tests (bats) stay in the tree: a user's installation has no use for them.
NOT_PACKAGED = ("runtime/tests",)
# What a work tree holds that is not sparkc's source: environments, caches, build and output folders.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", ".setuptools-build", "dist", "*.egg-info", "__pycache__", "*.pyc",
    ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".venv-sparkrun",
)  # fmt: skip


def source_copy(dest: Path) -> Path:
    """The tree as a fresh clone has it (no build folders, caches or environments), at `dest`."""
    shutil.copytree(ROOT, dest, ignore=NOT_SOURCE, symlinks=True)
    (dest / "build").mkdir()
    return dest


def tree_files() -> set[str]:
    """Every file of the tree that belongs in the wheel, by its path inside the wheel."""
    names = set()
    for folder, packaged in PACKAGED.items():
        for path in (ROOT / folder).rglob("*"):
            if path.relative_to(ROOT).as_posix().startswith(NOT_PACKAGED):
                continue
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                names.add(f"{packaged}/{path.relative_to(ROOT / folder).as_posix()}")
    return names


def test_the_wheel_holds_every_module_and_data_file_of_the_tree_and_nothing_else(tmp_path: Path) -> None:
    src = source_copy(tmp_path / "src")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("sparkc-*.whl")
    names = {n for n in zipfile.ZipFile(wheel).namelist() if not n.startswith("sparkc-") and not n.endswith("/")}
    # and each template compiled to a module, named as Jinja's ModuleLoader looks it up
    templates = [p.relative_to(ROOT / "templates").as_posix() for p in (ROOT / "templates").rglob("*.j2")]
    compiled = {f"compiler/templates_compiled/tmpl_{hashlib.sha1(n.encode()).hexdigest()}.py" for n in templates}
    expected = tree_files() | compiled
    assert {"compiler/resolve/__init__.py", "compiler/engines/vllm.py", "compiler/runtime/probe.py"} <= expected
    assert sorted(expected - names) == [], "in the tree, missing from the wheel"
    assert sorted(names - expected) == [], "in the wheel, not in the tree"


def test_a_stale_build_folder_cannot_put_old_modules_into_the_wheel(tmp_path: Path) -> None:
    """setuptools keeps its build folder between builds; a module deleted from the tree must not ship."""
    src = source_copy(tmp_path / "src")
    stale = src / ".setuptools-build" / "lib" / "compiler" / "removed_long_ago.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("raise SystemExit('an old module')\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("sparkc-*.whl")
    assert "compiler/removed_long_ago.py" not in zipfile.ZipFile(wheel).namelist()


def test_readme_quick_start_as_a_new_user_runs_it(tmp_path: Path) -> None:
    """README's quick start run by bash exactly as written, in a fresh copy of the tree (not this checkout),
    into the fresh virtual environment it makes; then that installed sparkc answers every command of
    README's table and compiles every example, from a folder outside the tree."""
    src = source_copy(tmp_path / "clone" / "sparkc")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", section("quick start")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (src / "build" / "launch-cluster.sh").is_file()
    assert "dry run" in done.stdout.lower()
    venv = src / ".venv" / "bin"
    imported = subprocess.run(
        [venv / "python", "-c", "import compiler; print(compiler.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert "site-packages" in imported.stdout, imported  # the venv's own copy, not the tree's

    table = (ROOT / "README.md").read_text(encoding="utf-8").split("## Commands", 1)[1].strip().split("\n\n", 1)[0]
    commands = sorted(set(re.findall(r"^\| `sparkc ([a-z][a-z-]*)", table, re.M)))
    assert len(commands) >= 8, table
    for command in commands:
        helped = subprocess.run([venv / "sparkc", command, "--help"], cwd=tmp_path, capture_output=True, text=True)
        assert helped.returncode == 0 and f"Usage: sparkc {command}" in helped.stdout, (command, helped.stderr)
    version = subprocess.run([venv / "sparkc", "--version"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert version == f"sparkc, version {project_version()}\n"

    for example in sorted(EXAMPLES.glob("*.yaml")):
        out = tmp_path / "out" / example.stem
        compiled = subprocess.run(
            [venv / "sparkc", "compile", example, "-o", out], cwd=tmp_path, capture_output=True, text=True
        )
        assert compiled.returncode == 0, (example.name, compiled.stderr)
        assert (out / "launch-cluster.sh").is_file()


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
