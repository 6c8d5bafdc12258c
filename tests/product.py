"""sparkc as its users get it: the tests that start sparkc as a program start this one.

Installed (CI installs the wheel into a fresh virtual environment and runs the suite from there), it is
the `sparkc` console script beside the running Python, and `compiler` is imported from site-packages.
In a source checkout that was never installed, it is the checkout's `compiler`, from any folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import compiler
from tests.specs import ROOT, dump

COMPILER_DIR: Final = Path(compiler.__file__).resolve().parent
INSTALLED: Final = not COMPILER_DIR.is_relative_to(ROOT)


def _argv() -> list[str]:
    if INSTALLED:
        script = Path(sys.executable).parent / "sparkc"
        assert script.is_file(), f"sparkc is installed at {COMPILER_DIR} but its console script {script} is missing"
        return [str(script)]
    # The checkout first on the path, whatever the working folder is; the program is the same entry point.
    return [
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from compiler.cli.entry import run; run()",
    ]


SPARKC: Final = _argv()


def run_sparkc(*args: str | os.PathLike[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`sparkc ARGS...` as a program; `kwargs` go to subprocess.run (text output, captured, by default)."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("check", False)
    return subprocess.run([*SPARKC, *map(str, args)], **kwargs)


def sparkc_compile(spec: Mapping[str, Any], out_dir: Path) -> list[str]:
    """`sparkc compile` of a spec that must be valid, written beside `out_dir`; returns its warnings."""
    spec_file = out_dir.with_name(out_dir.name + ".spec.yaml")
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(dump(spec), encoding="utf-8")
    done = run_sparkc("compile", spec_file, "-o", out_dir, "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    return [d["message"] for d in json.loads(done.stdout)["diagnostics"]]


# The folder that holds the `compiler` package under test (site-packages, or the checkout): a child
# `python -c` or `-m compiler` run there imports the same sparkc as the tests, never a second copy.
PACKAGE_HOME: Final = COMPILER_DIR.parent


def needs(tool_missing: bool, what: str) -> None:
    """A test whose tool is not installed here: a skip on a developer's machine, a failure under CI, which
    installs every tool the suite uses (simcluster/install.sh)."""
    if not tool_missing:
        return
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"{what}: CI must have it (simcluster/install.sh installs it)")
    pytest.skip(what)
