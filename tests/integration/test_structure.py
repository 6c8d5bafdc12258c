"""The code's shape, checked: one direction of imports (import-linter's contracts in pyproject.toml), lint and
types clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from tests.specs import EXAMPLES, ROOT

NAME_REFERENCED = (
    "readonly SPARKC_DOCKER_RUN_",
    "declare -rA SPARKC_DOCKER_RUN_",
    "readonly SPARKC_PROBE_RUN_",
    "declare -rA SPARKC_PROBE_RUN_",
    "  compiled_into=(",
)


def test_only_name_referenced_arrays_disable_the_unused_variable_check() -> None:
    """Every constant a script defines is read by it; the one exception is each node's `docker run`
    arrays (the engine's and the fabric probe's), read through a name reference that shellcheck cannot follow,
    and the library's one assignment through such a reference (compiled_run)."""
    for example in sorted(EXAMPLES.glob("*.yaml")):
        files = compile_text(example.read_text(encoding="utf-8"), example.name).files
        for name, text in files.items():
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if "disable=SC2034" in line:
                    assert lines[i + 1].startswith(NAME_REFERENCED), f"{example.name} {name}:{i + 1}"


def _tool(name: str) -> list[str]:
    beside = shutil.which(name, path=str(Path(sys.executable).parent))
    if shutil.which(name) is None and beside is None:
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    # lint-imports has no `python -m` form: its script beside this Python, which runs it with this Python
    return [beside or name] if name == "lint-imports" else [sys.executable, "-m", name]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],  # what is linted: [tool.ruff] in pyproject.toml
        ["ruff", "format", "--check", "."],
        ["mypy", "--strict", "compiler"],
        ["lint-imports"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict", "import-contracts"],
)
def test_lint_and_types(command: list[str]) -> None:
    result = subprocess.run([*_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
