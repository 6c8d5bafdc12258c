"""Every example compiles to exactly its reviewed snapshot; every invalid example to its diagnostics."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.diagnostics import Severity, format_text
from compiler.pipeline import compile_text
from tests.conftest import EXAMPLES, ROOT, SNAPSHOTS

VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def compile_example(path: Path):
    return compile_text(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_example_output_matches_snapshot(example: Path, snapshot) -> None:
    result = compile_example(example)
    assert result.ok, format_text(result.diagnostics, example.name, result.document.data)
    snapshot.snapshot_dir = SNAPSHOTS / "examples"
    snapshot.assert_match_dir(result.files, example.stem)


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_compile_is_deterministic(example: Path) -> None:
    assert compile_example(example).files == compile_example(example).files


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.stem)
def test_manifest_lists_every_generated_file_with_its_hash(example: Path) -> None:
    import hashlib

    files = compile_example(example).files
    manifest = json.loads(files["manifest.json"])
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
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
