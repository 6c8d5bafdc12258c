"""The cache of whole compiles: a hit hands out exactly what a full compile would, any changed input is a
miss, --check stores nothing, and a damaged entry or folder is a miss, never a failed compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compiler import build_cache, pipeline
from compiler.cli import main
from tests.specs import EXAMPLES

SEED = EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "sparkc" / "builds"


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The spec path of every compile that ran in full."""
    seen: list[str] = []
    real = pipeline.compile_text

    def counting(text: str, spec_path: str, **options: Any) -> pipeline.CompileResult:
        seen.append(spec_path)
        return real(text, spec_path, **options)

    monkeypatch.setattr(pipeline, "compile_text", counting)
    return seen


def folder(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def run(*args: str | Path) -> int:
    return main([str(a) for a in args])


def test_an_unchanged_compile_is_answered_from_the_cache(
    tmp_path: Path, cache: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("compile", SEED, "-o", tmp_path / "a") == 0
    first = capsys.readouterr()
    assert compiles == [str(SEED)] and len(list(cache.iterdir())) == 1
    assert run("compile", SEED, "-o", tmp_path / "b") == 0
    assert run("compile", SEED, "-o", tmp_path / "b", "--check") == 0
    assert compiles == [str(SEED)]  # neither ran the pipeline
    assert folder(tmp_path / "a") == folder(tmp_path / "b")
    second = capsys.readouterr()
    assert second.err == first.err * 2  # the same warnings (compile and check), from the cache
    assert "container.image: warning:" in second.err


def test_any_change_to_the_spec_or_flags_is_a_miss(
    tmp_path: Path, cache: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SEED.read_bytes())
    assert run("compile", spec, "-o", tmp_path / "out") == 0
    spec.write_bytes(SEED.read_bytes().replace(b"max_model_len: 4096", b"max_model_len: 4097"))
    assert run("compile", spec, "-o", tmp_path / "out", "--check") == 1  # the changed value, found
    assert b"MAX_MODEL_LEN=4097" not in (tmp_path / "out" / "launch-cluster.sh").read_bytes()
    assert run("compile", spec, "-o", tmp_path / "out", "--strict") == 1  # the warning, now an error
    assert len(compiles) == 3
    capsys.readouterr()


def test_validate_is_answered_by_an_earlier_compile_or_validate(
    tmp_path: Path, cache: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SEED.read_bytes())
    assert run("validate", spec) == 0
    first = capsys.readouterr()
    assert run("validate", spec) == 0
    assert run("compile", spec, "-o", tmp_path / "out") == 0  # a validation's entry holds no files: compiles
    assert (tmp_path / "out" / "launch-cluster.sh").is_file()
    spec.write_bytes(SEED.read_bytes().replace(b"max_model_len: 4096", b"max_model_len: 4097"))
    assert run("compile", spec, "-o", tmp_path / "out") == 0
    capsys.readouterr()
    assert run("validate", spec) == 0  # answered by that compile
    assert run("validate", spec, "--format", "json") == 0
    assert compiles == [str(spec)] * 3
    out = capsys.readouterr()
    assert out.err == first.err and "container.image: warning:" in out.err
    assert out.out.startswith(first.out) and '"severity": "warning"' in out.out


def test_an_invalid_spec_is_validated_in_full_every_time(
    tmp_path: Path, cache: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SEED.read_bytes().replace(b"tensor_parallel: 2", b"tensor_parallel: two"))
    assert run("validate", spec) == 1
    assert run("validate", spec) == 1
    assert run("validate", spec, "--strict") == 1
    assert len(compiles) == 3
    assert capsys.readouterr().err.count("engine.tensor_parallel") == 3


def test_check_stores_nothing(tmp_path: Path, cache: Path, compiles: list[str]) -> None:
    """--check does not lint, so what it compiled must not be handed to a compile as linted."""
    assert run("compile", SEED, "-o", tmp_path / "out", "--check") == 1
    assert not cache.exists() or not list(cache.iterdir())


def test_a_change_to_sparkc_itself_is_a_miss(
    tmp_path: Path, cache: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("compile", SEED, "-o", tmp_path / "out") == 0
    build_cache._installation.cache_clear()
    real = build_cache._installation.__wrapped__()
    assert real is not None
    monkeypatch.setattr(build_cache, "_installation", lambda: real + b"another template")
    assert run("compile", SEED, "-o", tmp_path / "out") == 0
    assert len(compiles) == 2


def sources(root: Path) -> bytes:
    files = [(root, p, p.stat()) for p in sorted(root.rglob("*"))]
    return build_cache._sources_digest(files)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file read through Path.read_bytes."""
    seen: list[Path] = []
    read = Path.read_bytes

    def counting(path: Path) -> bytes:
        seen.append(path)
        return read(path)

    monkeypatch.setattr(Path, "read_bytes", counting)
    return seen


def own_files(tmp_path: Path) -> Path:
    root = tmp_path / "sparkc"
    root.mkdir()
    (root / "a.sh").write_text("echo one\n")
    (root / "b.j2").write_text("{{ x | q }}\n")
    return root


def test_sparkcs_own_files_are_read_once_then_known_by_their_stat_data(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, reads: list[Path]
) -> None:
    monkeypatch.setattr(build_cache, "SETTLED_NS", 0)  # files as old as an installation's
    root = own_files(tmp_path)
    first = sources(root)
    assert sources(root) == first
    assert [p.name for p in reads if p.parent == root] == ["a.sh", "b.j2"]  # the second time: none read
    (root / "a.sh").write_text("echo three\n")
    changed = sources(root)
    assert changed != first
    for entry in (cache.parent / "sources").iterdir():  # a damaged remembered digest is never believed
        entry.write_bytes(b"\x00" * 64)
    assert sources(root) == changed


def test_files_changed_a_moment_ago_are_read_every_time(tmp_path: Path, cache: Path, reads: list[Path]) -> None:
    """A second change within the clock's granularity could leave the same times: not remembered yet."""
    root = own_files(tmp_path)
    assert sources(root) == sources(root)
    assert [p.name for p in reads if p.parent == root] == ["a.sh", "b.j2"] * 2
    assert not (cache.parent / "sources").exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other files, old digest", "a folder", "wrong shape"])
def test_a_damaged_entry_is_a_miss(
    tmp_path: Path, cache: Path, compiles: list[str], damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib
    import json

    assert run("compile", SEED, "-o", tmp_path / "out") == 0
    expected = folder(tmp_path / "out")
    (entry,) = cache.iterdir()
    data = entry.read_bytes()
    head = build_cache.FORMAT
    if damage == "a folder":
        entry.unlink()
        entry.mkdir()
    elif damage == "wrong shape":
        payload = json.dumps({"files": ["x"], "text_report": "", "json_report": [], "head": "h"}).encode()
        entry.write_bytes(head + hashlib.sha256(payload).digest() + payload)
    else:
        entry.write_bytes(
            {
                "garbage": b"\x00" * 50,
                "truncated": data[: len(data) // 2],
                "other files, old digest": data.replace(b"readonly", b"readonlx", 1),
            }[damage]
        )
    assert run("compile", SEED, "-o", tmp_path / "again") == 0
    assert folder(tmp_path / "again") == expected
    assert len(compiles) == 2


@pytest.mark.parametrize("breakage", ["root is a file", "builds is a file", "unwritable"])
def test_a_broken_cache_folder_never_fails_a_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breakage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    if breakage == "root is a file":
        home.write_text("x")
    elif breakage == "builds is a file":
        (home / "sparkc").mkdir(parents=True)
        (home / "sparkc" / "builds").write_text("x")
    else:
        home.mkdir()
        home.chmod(0o500)
        monkeypatch.setattr(build_cache, "write_quietly", lambda path, content: path.parent.mkdir(parents=True))
    try:
        assert run("compile", SEED, "-o", tmp_path / "out") == 0
        assert run("compile", SEED, "-o", tmp_path / "out", "--check") == 0
    finally:
        if home.is_dir():
            home.chmod(0o700)


def test_old_entries_are_pruned(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_cache, "KEEP", 2)
    for n in range(4):
        spec = tmp_path / f"spec{n}.yaml"
        spec.write_bytes(SEED.read_bytes())
        assert run("compile", spec, "-o", tmp_path / f"out{n}") == 0
    assert len(list(cache.iterdir())) == 2


def test_a_compile_that_read_the_model_index_is_reused_only_while_the_index_is_unchanged(
    tmp_path: Path, cache: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The memory fit check reads the weights' index where this machine has it: a remembered compile must
    not hand out the warning of an index that has since changed, appeared or gone."""
    import json

    from tests.specs import dump, example, with_changes

    weights = tmp_path / "weights"
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(with_changes(example("llama33-70b-2spark-native"), {"model.path": str(weights)})))
    index = weights / "model.safetensors.index.json"

    def compile_warnings() -> list[str]:
        capsys.readouterr()
        assert run("compile", spec, "-o", tmp_path / "out") == 0
        return [line for line in capsys.readouterr().err.splitlines() if "cannot hold" in line]

    assert compile_warnings() == []  # no index here yet: nothing to warn about
    weights.mkdir()
    index.write_text(json.dumps({"metadata": {"total_size": 240 * 10**9}}))
    assert len(compile_warnings()) == 2  # the index appeared: compiled again, both nodes too small
    assert len(compile_warnings()) == 2 and len(compiles) == 2  # unchanged: from the cache, same warnings
    index.write_text(json.dumps({"metadata": {"total_size": 60 * 10**9}}))
    assert compile_warnings() == [] and len(compiles) == 3  # changed: compiled again, it fits now
    index.unlink()
    assert compile_warnings() == [] and len(compiles) == 4
