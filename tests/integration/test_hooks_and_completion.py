"""The pre-commit hooks sparkc offers, and the shell completion click produces for it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from compiler.cli.precommit import run
from tests.product import SPARKC
from tests.specs import EXAMPLES, ROOT


def hooks() -> dict[str, dict[str, object]]:
    data = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    return {hook["id"]: hook for hook in data}


def test_the_hooks_are_declared_as_pre_commit_reads_them() -> None:
    found = hooks()
    assert set(found) == {"sparkc-validate", "sparkc-compile-check"}
    for hook in found.values():
        assert {"id", "name", "entry", "language"} <= set(hook)
        re.compile(str(hook["files"]))
    assert re.search(str(found["sparkc-validate"]["files"]), "deploy/specs/qwen.yaml")
    assert not re.search(str(found["sparkc-validate"]["files"]), ".github/workflows/ci.yml")


def test_validate_hook_takes_several_specs_and_reports_the_worst(capsys: pytest.CaptureFixture[str]) -> None:
    good = str(EXAMPLES / "solo-qwen3-32b.yaml")
    bad = str(EXAMPLES / "invalid" / "bad-paths.yaml")
    assert run(["validate", good, good]) == 0
    assert run(["validate", good, bad]) == 1
    assert "bad-paths.yaml:" in capsys.readouterr().err


def test_compile_check_hook_finds_stale_output(tmp_path: Path) -> None:
    spec = EXAMPLES / "solo-qwen3-32b.yaml"
    out = tmp_path / "{stem}"
    assert run(["compile-check", "-o", str(out), str(spec)]) == 1  # nothing compiled yet
    subprocess.run(
        [*SPARKC, "compile", str(spec), "-o", str(tmp_path / spec.stem)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    assert run(["compile-check", "-o", str(out), str(spec)]) == 0
    assert run(["nonsense"]) == 2


@pytest.mark.parametrize(
    ("shell", "marker"), [("bash", "complete -o nosort -F"), ("zsh", "compdef"), ("fish", "complete")]
)
def test_click_produces_a_completion_script(shell: str, marker: str) -> None:
    env = {**os.environ, "_SPARKC_COMPLETE": f"{shell}_source"}
    done = subprocess.run(SPARKC, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout and "_SPARKC_COMPLETE" in done.stdout


def test_completion_offers_the_commands() -> None:
    env = {**os.environ, "_SPARKC_COMPLETE": "bash_complete", "COMP_WORDS": "sparkc co", "COMP_CWORD": "1"}
    done = subprocess.run(SPARKC, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    assert "plain,compile" in done.stdout.splitlines()


def test_bash_accepts_the_completion_script() -> None:
    bash = shutil.which("bash")
    assert bash
    env = {**os.environ, "_SPARKC_COMPLETE": "bash_source"}
    script = subprocess.run(SPARKC, env=env, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert subprocess.run([bash, "-n"], input=script, text=True, check=False).returncode == 0
