"""The served model name a client types: the weights folder's name, not the container path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from tests.specs import DELETE, compile_into, compile_spec, dump, example, flag_value, ray_engine_words, with_changes

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


def test_aliases_follow_the_first_name_after_one_flag_and_the_first_name_is_checked(tmp_path: Path) -> None:
    spec = with_changes(
        example("qwen3-32b-2spark-ray-crosscabled"), {"model.name": "qwen3-32b", "model.aliases": ["qwen", "gpt-4o"]}
    )
    result = compile_into(spec, tmp_path / "out", "t.yaml")
    assert result.plan is not None
    words = ray_engine_words(result.plan)
    assert words.count("--served-model-name") == 1
    after = words[words.index("--served-model-name") + 1 :][:4]
    assert after[:3] == ("qwen3-32b", "qwen", "gpt-4o") and after[3].startswith("--")
    assert result.plan.served_model_name == "qwen3-32b"  # readiness, bench and the manifest ask for the first
    plan_page = (tmp_path / "out" / "PLAN.md").read_text(encoding="utf-8")
    assert "served as `qwen3-32b` at" in plan_page and "Also served as `qwen`, `gpt-4o`." in plan_page
    assert "SPARKC_SERVED_MODEL=qwen3-32b" in (tmp_path / "out" / "deployment.sh").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("sglang-qwen3-30b-2spark", "SGLang's --served-model-name takes one name"),
        ("trtllm-qwen3-235b-2spark-mpi", "trtllm-serve has no --served-model-name"),
    ],
)
def test_an_engine_that_serves_one_name_refuses_aliases_naming_the_field(name: str, says: str) -> None:
    result = compile_spec(with_changes(example(name), {"model.aliases": ["other"]}), "t.yaml", render_files=False)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert len(errors) == 1 and says in errors[0].message
    assert errors[0].path == ("model", "aliases")


@pytest.mark.parametrize("alias", ["--port", "two words", ""])
def test_an_alias_the_engine_would_misread_is_refused(alias: str) -> None:
    result = compile_spec(with_changes(SOLO, {"model.aliases": [alias]}), "t.yaml", render_files=False)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert len(errors) == 1 and "must not start with '-'" in errors[0].message
