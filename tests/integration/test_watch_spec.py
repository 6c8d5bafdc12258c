"""watch.on_failure: checked where the spec says it (file:line:col), carried into deployment.sh as data,
and watch.sh with its systemd unit written for every ssh-target deployment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compiler.output.render import SCRIPTS
from compiler.pipeline import compile_text
from tests.specs import diagnostics_text, dump, example, with_changes

SOLO = "solo-qwen3-32b"


def position(text: str, key: str) -> tuple[int, int]:
    """Line and column (1-based) of the value after `key:` in the dumped spec."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(f"{key}:"):
            return number, line.index(f"{key}:") + len(key) + 3
    raise AssertionError(f"{key} not in the spec")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "must be text, found the number 42"),
        ("", "must not be empty"),
        ("logger failed\nreboot", "control characters (newline, tab, ...) are not allowed in values"),
    ],
)
def test_a_bad_on_failure_is_refused_where_the_spec_says_it(value: object, message: str) -> None:
    text = dump(with_changes(example(SOLO), {"watch": {"on_failure": value}}))
    result = compile_text(text, "spec.yaml")
    line, column = position(text, "on_failure")
    assert not result.ok
    assert f"spec.yaml:{line}:{column}: watch.on_failure: {message}" in diagnostics_text(result)


def test_an_unknown_watch_key_is_refused_with_the_one_meant() -> None:
    result = compile_text(dump(with_changes(example(SOLO), {"watch": {"on_fail": "true"}})), "spec.yaml")
    assert not result.ok and "watch.on_fail: unknown key 'on_fail'; did you mean 'on_failure'?" in diagnostics_text(
        result
    )


def test_the_command_reaches_deployment_sh_as_data_and_watch_sh_and_its_unit_are_written(tmp_path: Path) -> None:
    hostile = "echo \"$SPARKC_WATCH_KIND\" '$(touch pwned)' `id` ; exit 0 # \\"
    result = compile_text(dump(with_changes(example(SOLO), {"watch": {"on_failure": hostile}})), "spec.yaml")
    assert result.ok, diagnostics_text(result)
    assert "watch.sh" in SCRIPTS and "watch.sh" in result.files
    for name, text in result.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    read = subprocess.run(
        [
            "bash",
            "-c",
            'SPARKC_SCRIPT_DIR=$1; source "$1/deployment.sh"; printf %s "$SPARKC_WATCH_ON_FAILURE"',
            "x",
            tmp_path,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert read.returncode == 0 and read.stdout == hostile, read.stderr
    assert not (tmp_path / "pwned").exists()
    unit = result.files["systemd/sparkc-qwen3-32b-watch.service"].splitlines()
    for line in (
        "After=sparkc-qwen3-32b.service",
        "Wants=sparkc-qwen3-32b.service",
        "ExecStart=/etc/sparkc/deployments/qwen3-32b/watch.sh",
        "Restart=on-failure",
        "RestartPreventExitStatus=1 2",
        "WantedBy=multi-user.target",
    ):
        assert line in unit, line


def test_without_on_failure_the_manifest_plan_has_no_watch_entry() -> None:
    result = compile_text(dump(example(SOLO)), "spec.yaml")
    assert result.ok and '"watch_on_failure"' not in result.files["manifest.json"]
    assert "readonly SPARKC_WATCH_ON_FAILURE=''" in result.files["deployment.sh"]
