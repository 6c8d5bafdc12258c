"""The code's shape, checked: small modules, one direction of data flow, lint and types clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from tests.specs import EXAMPLES, ROOT

COMPILER = ROOT / "compiler"


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_render_reads_the_plan_and_never_the_resolver() -> None:
    assert not {
        m for m in imports(COMPILER / "output" / "render.py") if m.startswith(("compiler.resolve", "compiler.engines"))
    }


def test_no_module_is_over_350_lines() -> None:
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in COMPILER.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 350} == {}


def test_only_name_referenced_arrays_disable_the_unused_variable_check() -> None:
    """Every constant a script defines is read by it; the one exception is each node's `docker run`
    arrays (the engine's and the fabric probe's), read through a name reference that shellcheck cannot follow."""
    for example in sorted(EXAMPLES.glob("*.yaml")):
        files = compile_text(example.read_text(encoding="utf-8"), example.name).files
        for name, text in files.items():
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if "disable=SC2034" in line:
                    assert lines[i + 1].startswith(("readonly DOCKER_RUN_", "readonly PROBE_RUN_")), (
                        f"{example.name} {name}:{i + 1}"
                    )


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None and shutil.which(name, path=str(Path(sys.executable).parent)) is None:
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    return [sys.executable, "-m", name]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "compiler", "tests", "benchmarks"],
        ["ruff", "format", "--check", "compiler", "tests", "benchmarks"],
        ["mypy", "--strict", "compiler"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_lint_and_types(command: list[str]) -> None:
    result = subprocess.run([*_tool(command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
