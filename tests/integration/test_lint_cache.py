"""The shellcheck gate's shortcut: a cache of clean scripts. It may skip work; it may never let a finding
through or fail a compile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compiler.output import bash_constants, bash_words, lint, render
from compiler.output.lint import LintCache, lint_scripts
from compiler.pipeline import GeneratedScriptError
from tests.specs import compile_spec, example, with_changes

STOP = "deployment.sh"  # the one file of constants the scripts beside it source
# The plan the scripts' sentinel is taken from (every deployment.sh below has its constants).
PLAN = compile_spec(example("seed-qwen35-122b-2spark-ray")).plan


class Recorder(LintCache):
    """A cache in `folder` that notes every key it is asked about."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.asked: list[str] = []

    def is_clean(self, key: str) -> bool:
        self.asked.append(key)
        return super().is_clean(key)


@pytest.fixture(autouse=True)
def fresh_templates() -> Iterator[None]:
    """Jinja's environment (and so its template cache's folder) made anew for each test, and after it."""
    render.environment.cache_clear()
    yield
    render.environment.cache_clear()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every script shellcheck actually runs on (the checks start_lint starts)."""
    seen: list[str] = []
    real = lint.Lint

    def recording(texts: dict[str, str] | None = None, *args: Any, **kwargs: Any) -> lint.Lint:
        seen.extend(texts or {})
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(lint, "Lint", recording)
    return seen


def stop_script(changes: dict[str, object] | None = None) -> dict[str, str]:
    spec = with_changes(example("seed-qwen35-122b-2spark-ray"), changes or {})
    return {STOP: compile_spec(spec).files[STOP]}


def with_line(files: dict[str, str], line: str) -> dict[str, str]:
    """The script with `line` added after its SPARKC_HEAD constant, as a template change would add it."""
    text = files[STOP]
    at = text.index("\n", text.index("readonly SPARKC_HEAD=")) + 1
    return {STOP: text[:at] + line + "\n" + text[at:]}


def test_a_clean_script_is_checked_once_then_remembered(tmp_path: Path, checked: list[str]) -> None:
    cache = LintCache(tmp_path)
    files = stop_script()
    checked.clear()
    assert lint_scripts(files, cache, plan=PLAN) == []
    assert checked == [STOP]
    assert lint_scripts(files, cache, plan=PLAN) == []
    assert checked == [STOP]  # the second time from the cache
    assert lint_scripts(files, LintCache(None), plan=PLAN) == []
    assert checked == [STOP, STOP]  # no cache: checked again


def test_any_change_to_the_text_is_checked_afresh(tmp_path: Path, checked: list[str]) -> None:
    cache = LintCache(tmp_path)
    assert lint_scripts(stop_script(), cache, plan=PLAN) == []
    other = stop_script({"name": "other-name"})
    checked.clear()
    assert lint_scripts(other, cache, plan=PLAN) == []
    assert checked == [STOP]


def test_findings_are_never_remembered(tmp_path: Path, checked: list[str]) -> None:
    cache = LintCache(tmp_path)
    bad = with_line(stop_script(), "readonly UNUSED_CONSTANT=1")
    checked.clear()
    first = lint_scripts(bad, cache, plan=PLAN)
    assert any("SC2034" in line for line in first), first
    assert lint_scripts(bad, cache, plan=PLAN) == first
    assert checked == [STOP, STOP]
    assert not list(tmp_path.iterdir())


def test_a_new_tool_is_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checked: list[str]) -> None:
    cache = LintCache(tmp_path)
    files = stop_script()
    assert lint_scripts(files, cache, plan=PLAN) == []
    checked.clear()
    monkeypatch.setattr(lint, "SHELLCHECK_FLAGS", (*lint.SHELLCHECK_FLAGS, "--severity=style"))
    assert lint_scripts(files, cache, plan=PLAN) == []
    assert checked == [STOP]


def test_a_value_that_escapes_its_quotes_fails_the_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = with_changes(example("seed-qwen35-122b-2spark-ray"), {"container.env": {"GREETING": "a'; exit 0; '"}})
    assert compile_spec(spec).ok  # as quoted, clean: and now in the cache
    for module in (render, bash_words, bash_constants):
        monkeypatch.setattr(module, "quote", lambda value: f"'{value}'")  # a quoting bug
    render.environment.cache_clear()
    with pytest.raises(GeneratedScriptError, match=r"deployment\.sh"):
        compile_spec(spec)


def test_poisoned_entries_do_not_pass_a_bad_script(tmp_path: Path) -> None:
    good, bad = stop_script(), with_line(stop_script(), "readonly UNUSED_CONSTANT=1")
    recorder = Recorder(tmp_path)
    assert lint_scripts(good, recorder, plan=PLAN) == []
    good_keys, recorder.asked = recorder.asked, []
    assert lint_scripts(bad, recorder, plan=PLAN)
    (bad_key,) = recorder.asked
    assert bad_key not in good_keys
    entry = (tmp_path / good_keys[0]).read_bytes()
    for poison in (entry, b"", b"garbage\n", entry[:-5], entry.replace(b"clean", b"dirty"), None):
        path = tmp_path / bad_key
        if poison is None:
            path.mkdir()
        else:
            path.write_bytes(poison)
        assert lint_scripts(bad, LintCache(tmp_path), plan=PLAN), poison
        path.rmdir() if path.is_dir() else path.unlink()


@pytest.mark.parametrize("breakage", ["root is a file", "lint is a file", "entries are folders", "relative"])
def test_a_broken_cache_folder_never_fails_a_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breakage: str
) -> None:
    spec = example("solo-qwen3-32b")
    expected = compile_spec(spec).files
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    if breakage == "root is a file":
        home.write_text("x")
    elif breakage == "lint is a file":
        (home / "sparkc").mkdir(parents=True)
        (home / "sparkc" / "lint").write_text("x")
    elif breakage == "entries are folders":
        compile_spec(spec)
        for entry in (home / "sparkc" / "lint").iterdir():
            entry.unlink()
            entry.mkdir()
    else:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG rule says
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_spec(spec).files == expected
    assert not (tmp_path / "relative").exists()
