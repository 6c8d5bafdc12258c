"""The command line through click's runner: exit codes, output formats, --check, explain, schema."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler import __version__, pipeline
from compiler.cli.main import cli, main
from tests.product import PACKAGE_HOME
from tests.specs import EXAMPLES, dump, example, with_changes

SEED = EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_compile_writes_scripts_and_check_passes(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "build"
    result = runner.invoke(cli, ["compile", str(SEED), "-o", str(out)])
    assert result.exit_code == 0, result.output
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        ".gitattributes",
        "PLAN.md",
        "bench.sh",
        "deployment.sh",
        "distribute.sh",
        "fetch-model.sh",
        "install-service.sh",
        "launch-cluster.sh",
        f"lib/sparkc-{__version__}.sh",
        "logs.sh",
        "manifest.json",
        "status.sh",
        "stop-cluster.sh",
        "systemd/sparkc-qwen35-122b-watch.service",
        "systemd/sparkc-qwen35-122b.service",
        "watch.sh",
    ]
    assert (out / "launch-cluster.sh").stat().st_mode & 0o111 and (out / "watch.sh").stat().st_mode & 0o111
    assert not (out / "PLAN.md").stat().st_mode & 0o111
    assert runner.invoke(cli, ["compile", str(SEED), "-o", str(out), "--check"]).exit_code == 0
    (out / "status.sh").write_text("#!/bin/sh\n")
    check = runner.invoke(cli, ["compile", str(SEED), "-o", str(out), "--check"])
    assert check.exit_code == 1 and "status.sh" in check.output
    assert runner.invoke(cli, ["compile", str(SEED), "-o", str(out)]).exit_code == 0
    (out / "PLAN.md").write_text("# edited by hand\n")  # the page is checked like the scripts
    check = runner.invoke(cli, ["compile", str(SEED), "-o", str(out), "--check"])
    assert check.exit_code == 1 and "PLAN.md" in check.output


def test_recompiling_another_spec_removes_only_files_sparkc_wrote(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "build"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert runner.invoke(cli, ["compile", str(SEED), "-o", str(out)]).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    # Another deployment's unit, as a compile records it.
    manifest["files"]["systemd/sparkc-old.service"] = hashlib.sha256(b"").hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "systemd" / "sparkc-old.service").write_text("")
    result = runner.invoke(cli, ["compile", str(SEED), "-o", str(out)])
    assert "systemd/sparkc-old.service" in result.output and not (out / "systemd" / "sparkc-old.service").exists()
    assert (out / "notes.txt").read_text() == "mine"


def test_failed_compile_leaves_output_as_it_was(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert runner.invoke(cli, ["compile", str(SEED), "-o", str(out)]).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.yaml"
    bad.write_text(dump(with_changes(example(SEED.name), {"engine.tensor_parallel": 4})))
    result = runner.invoke(cli, ["compile", str(bad), "-o", str(out)])
    assert result.exit_code == 1
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_validate_reports_positions_and_json(runner: CliRunner) -> None:
    spec = EXAMPLES / "invalid" / "unknown-keys.yaml"
    text = runner.invoke(cli, ["validate", str(spec)])
    assert text.exit_code == 1
    assert f"{spec}:10:3: container.entrypiont: unknown key 'entrypiont'; did you mean 'entrypoint'?" in text.output
    as_json = runner.invoke(cli, ["validate", str(spec), "--format", "json"])
    assert as_json.exit_code == 1
    items = json.loads(as_json.stdout)["diagnostics"]
    assert {
        "file": str(spec),
        "line": 10,
        "column": 3,
        "path": "container.entrypiont",
        "severity": "error",
        "message": "unknown key 'entrypiont'; did you mean 'entrypoint'?",
    } in items


def test_warnings_exit_0_unless_strict(runner: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "custom.yaml"
    spec.write_text(dump(with_changes(example("solo-qwen3-32b"), {"container.image": "ghcr.io/me/vllm:1"})))
    relaxed = runner.invoke(cli, ["validate", str(spec)])
    assert relaxed.exit_code == 0 and "warning: no profile for image" in relaxed.output
    strict = runner.invoke(cli, ["validate", str(spec), "--strict"])
    assert strict.exit_code == 1 and "(--strict)" in strict.output


def test_explain_shows_sources_per_node(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["explain", str(SEED)])
    assert result.exit_code == 0, result.output
    assert "node spark-b (worker, rank 1, aurora@spark-b.local" in result.output
    line = next(
        line
        for line in result.output.splitlines()
        if line.strip().startswith("VLLM_HOST_IP") and "192.168.100.11" in line
    )
    assert "derived" in line
    assert "MODEL_PATH" in result.output and "profile" in result.output
    as_json = json.loads(runner.invoke(cli, ["explain", str(SEED), "--format", "json"]).stdout)
    assert as_json["entrypoint_mode"] == "adapt" and len(as_json["nodes"]) == 2


def test_schema_and_version(runner: CliRunner) -> None:
    schema = json.loads(runner.invoke(cli, ["schema"]).output)
    assert schema["title"] == "sparkc deployment spec"
    assert __version__ in runner.invoke(cli, ["--version"]).output


def test_exit_codes_through_main(tmp_path: Path, capsys) -> None:
    assert main(["compile", str(SEED), "-o", str(tmp_path / "b")]) == 0
    assert main(["validate", str(EXAMPLES / "invalid" / "empty.yaml")]) == 1
    assert main(["compile", "--bogus"]) == 2
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert main(["validate", str(binary)]) == 2


def test_a_bug_names_the_command_and_version_without_traceback(monkeypatch, capsys, tmp_path: Path) -> None:
    def broken(*args, **kwargs):
        raise KeyError("oops")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no earlier run of this spec to answer from

    monkeypatch.setattr(pipeline, "compile_text", broken)
    assert main(["validate", str(SEED)]) == 3
    err = capsys.readouterr().err
    assert f"sparkc {__version__} hit a bug: KeyError" in err and "Traceback" not in err
    assert f"command: sparkc validate {SEED}" in err and "SPARKC_DEBUG=1" in err
    assert "http" not in err  # pyproject.toml names no address for bug reports, so none is made up
    monkeypatch.setenv("SPARKC_DEBUG", "1")
    assert main(["validate", str(SEED)]) == 3
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.delenv("SPARKC_DEBUG")
    assert main(["validate", str(SEED), "--format", "json"]) == 3
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "bug" and error["exit_code"] == 3 and "KeyError" in error["message"]


def test_python_dash_m_works(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "compiler", "validate", str(SEED)], cwd=PACKAGE_HOME, capture_output=True, text=True
    )
    assert result.returncode == 0 and "valid" in result.stdout
