"""Every example compiles to exactly its reviewed snapshot; every invalid example to its diagnostics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compiler import __version__
from compiler.diagnostics import Severity, format_text
from compiler.output.library import library_path, library_text
from compiler.pipeline import Beside, CompileResult
from compiler.plan import PATCHES_DIR
from tests.product import SPARKC
from tests.specs import EXAMPLES, ROOT, compile_spec

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def compile_example(path: Path) -> CompileResult:
    text, name = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
    return compile_spec(text, name, beside=Beside(spec_dir=path.parent))


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_example_output_matches_snapshot(example: Path, snapshot) -> None:
    result = compile_example(example)
    assert result.ok, format_text(result.diagnostics, example.name, result.document.data)
    assert result.plan is not None
    library = library_path(result.plan.sparkc_version)
    # The library is the same for every example: the reviewed one, snapshotted once under library/.
    snapshot.snapshot_dir = SNAPSHOTS / "library"
    snapshot.assert_match(result.files[library], Path(library).name)
    snapshot.snapshot_dir = SNAPSHOTS / "examples"
    snapshot.assert_match_dir(nested({k: v for k, v in result.files.items() if k != library}), example.stem)


def test_library_matches_snapshot(snapshot) -> None:
    snapshot.snapshot_dir = SNAPSHOTS / "library"
    snapshot.assert_match(library_text(__version__), f"sparkc-{__version__}.sh")


def nested(files: dict[str, str]) -> dict[str, Any]:
    """`a/b` -> {"a": {"b": ...}}: how the snapshot plugin takes files in folders."""
    tree: dict[str, Any] = {}
    for name, text in files.items():
        *folders, last = name.split("/")
        node = tree
        for folder in folders:
            node = node.setdefault(folder, {})
        node[last] = text
    return tree


# Two processes that differ in everything that must not matter: hash seed (set and dict order), working
# directory, time zone and locale (C without UTF-8 mode: an ASCII locale).
PROCESS_ENVS = (
    {"PYTHONHASHSEED": "1", "TZ": "UTC0", "LC_ALL": "C.UTF-8"},
    {"PYTHONHASHSEED": "4242", "TZ": "<+1245>-12:45", "LC_ALL": "C", "PYTHONUTF8": "0"},
)


def compile_in_process(example: Path, workdir: Path, env: dict[str, str]) -> dict[str, tuple[bytes, bool]]:
    """`sparkc compile` of a copy of the example at the same relative path, run in `workdir`;
    returns each written file's bytes and whether it is executable."""
    spec = workdir / example.relative_to(ROOT)
    spec.parent.mkdir(parents=True)
    shutil.copyfile(example, spec)
    if (example.parent / PATCHES_DIR).is_dir():  # hooks' patch folders, beside the examples
        shutil.copytree(example.parent / PATCHES_DIR, spec.parent / PATCHES_DIR)
    run = subprocess.run(
        [*SPARKC, "compile", str(example.relative_to(ROOT)), "-o", "out"],
        cwd=workdir,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = workdir / "out"
    return {
        p.relative_to(out).as_posix(): (p.read_bytes(), os.access(p, os.X_OK))
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_compile_is_deterministic_across_processes(example: Path, tmp_path: Path) -> None:
    first, second = (compile_in_process(example, tmp_path / f"run{i}", env) for i, env in enumerate(PROCESS_ENVS))
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], f"{name} differs between two processes"
    # and both equal what this process compiles (which the snapshot test compares with the reviewed files)
    assert {name: text.encode() for name, text in compile_example(example).files.items()} == {
        name: data for name, (data, _) in first.items()
    }


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_manifest_lists_every_generated_file_with_its_hash(example: Path) -> None:
    import hashlib

    files = compile_example(example).files
    manifest = json.loads(files["manifest.json"])
    patches = {name for name in files if name.startswith(f"{PATCHES_DIR}/")}  # listed with their hooks
    assert set(manifest["files"]) == set(files) - {"manifest.json"} - patches
    hooks = manifest["plan"].get("hooks") or {"patches": []}
    for patch in hooks["patches"]:
        text = files[f"{PATCHES_DIR}/{patch['path']}"]
        assert hashlib.sha256(text.encode()).hexdigest() == patch["sha256"]
    for name, digest in manifest["files"].items():
        assert hashlib.sha256(files[name].encode()).hexdigest() == digest
    assert manifest["spec"]["sha256"] == hashlib.sha256(example.read_bytes()).hexdigest()


def test_every_example_carries_the_schema_hint() -> None:
    for example in VALID:
        assert example.read_text().startswith("# yaml-language-server: $schema=../schemas/spec.schema.json")


@pytest.mark.parametrize("example", INVALID, ids=lambda p: p.stem)
def test_invalid_example_diagnostics(example: Path, snapshot) -> None:
    result = compile_example(example)
    assert not result.ok
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert errors and all(d.line > 0 and d.column > 0 for d in errors)
    snapshot.snapshot_dir = SNAPSHOTS / "invalid"
    text = format_text(result.diagnostics, str(example.relative_to(ROOT)), result.document.data)
    snapshot.assert_match(text + "\n", example.stem + ".txt")
