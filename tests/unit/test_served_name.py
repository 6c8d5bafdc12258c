"""The served model name a client types: the weights folder's name, not the container path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from tests.specs import DELETE, compile_spec, dump, example, flag_value, ray_engine_words, with_changes

SOLO = with_changes(example("solo-qwen3-32b"), {"model.name": DELETE})


def served(spec: dict[str, Any]) -> str:
    result = compile_spec(spec, "t.yaml", render_files=False)
    assert result.plan is not None
    return result.plan.served_model_name


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/home/aurora/models/Qwen3-32B", "Qwen3-32B"),
        ("/home/aurora/models/Qwen3-32B/", "Qwen3-32B"),
        ("/srv/hf/hub/models--Qwen--Qwen3-32B/snapshots/9216db5781bf21249d130ec9da846c4624c16137", "Qwen/Qwen3-32B"),
        ("/srv/hf/hub/models--meta-llama--Llama-3.3-70B-Instruct/snapshots/abc/", "meta-llama/Llama-3.3-70B-Instruct"),
    ],
)
def test_the_default_is_what_a_client_would_type(path: str, name: str) -> None:
    assert served(with_changes(SOLO, {"model.path": path})) == name


def test_the_mount_does_not_change_the_default() -> None:
    spec = with_changes(SOLO, {"model.mount": "/models/weights"})
    assert served(spec) == "Qwen3-32B"


def test_an_explicit_name_is_kept_as_written() -> None:
    assert served(with_changes(SOLO, {"model.name": "/models/whatever"})) == "/models/whatever"


def test_the_engine_is_told_the_default_name() -> None:
    spec = with_changes(example("qwen3-32b-2spark-ray-crosscabled"), {"model.name": DELETE})
    result = compile_spec(spec, "t.yaml", render_files=False)
    assert result.plan is not None
    assert flag_value(ray_engine_words(result.plan), "--served-model-name") == "Qwen3-32B"


def test_a_folder_name_that_starts_with_a_dash_needs_a_name() -> None:
    result = compile_spec(with_changes(SOLO, {"model.path": "/srv/-odd"}), "t.yaml", render_files=False)
    errors = [d.message for d in result.diagnostics if d.severity is Severity.ERROR]
    assert len(errors) == 1 and "set model.name" in errors[0]


def test_explain_shows_where_the_name_came_from(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(dump(SOLO), encoding="utf-8")
    out = CliRunner().invoke(cli, ["explain", str(spec_file)]).output
    line = next(t for t in out.splitlines() if t.strip().startswith("served_model_name") and "derived" in t)
    assert "Qwen3-32B" in line and "model.path's folder name" in line
