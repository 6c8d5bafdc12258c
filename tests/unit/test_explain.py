"""`sparkc explain` names the real source of every value, in every entrypoint mode.

The seed's image (hellohal2064) has an entrypoint that builds `vllm serve` from variables: in keep
mode its port comes from the image, not from the spec, and explain must say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from tests.specs import DELETE, dump, example, with_changes


def explain(tmp_path: Path, changes: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "spec.yaml"
    path.write_text(dump(with_changes(example("seed-qwen35-122b-2spark-ray"), changes)), encoding="utf-8")
    result = CliRunner().invoke(cli, ["explain", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    plan: dict[str, Any] = json.loads(result.stdout)
    return plan


def setting(plan: dict[str, Any], name: str) -> tuple[str, str]:
    found = next(s for s in plan["settings"] if s["name"] == name)
    return found["value"], found["source"]


def effective(plan: dict[str, Any], name: str) -> tuple[str, str]:
    found = next(e for e in plan["effective"] if e["setting"] == name)
    return found["effective"], found["source"]


def head_env(plan: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["value"], s["source"]) for s in plan["nodes"][0]["env"]}


def test_bypass_values_come_from_the_spec_or_sparkc_defaults(tmp_path: Path) -> None:
    plan = explain(tmp_path, {"container.entrypoint": "bypass", "engine.gpu_memory_utilization": DELETE})
    assert plan["entrypoint_mode"] == "bypass"
    assert setting(plan, "entrypoint") == ("bypass", "spec")
    assert setting(plan, "api_port") == ("30000", "spec")
    assert effective(plan, "max_model_len") == ("4096", "spec")
    assert effective(plan, "host") == ("0.0.0.0", "default")
    assert effective(plan, "gpu_memory_utilization") == ("", "default")
    assert "PORT" not in head_env(plan)  # the entrypoint does not run: nothing to adapt

    plan = explain(tmp_path, {"container.entrypoint": "bypass", "engine.port": DELETE})
    assert setting(plan, "api_port") == ("8000", "default")


def test_adapt_variables_carry_the_source_of_their_value(tmp_path: Path) -> None:
    plan = explain(tmp_path, {"engine.max_model_len": DELETE})
    assert setting(plan, "entrypoint") == ("adapt", "profile")  # auto, decided by the image's profile
    assert setting(plan, "api_port") == ("30000", "spec")
    env = head_env(plan)
    assert env["PORT"] == ("30000", "spec")
    assert env["MODEL_PATH"] == ("/models/Qwen3.5-122B-A10B-FP8", "spec")
    # Not in the spec: the entrypoint's own default, which adapt sets explicitly.
    assert env["MAX_MODEL_LEN"] == ("8192", "profile")
    assert effective(plan, "max_model_len") == ("8192", "profile")


def test_keep_reports_the_port_the_image_really_uses(tmp_path: Path) -> None:
    plan = explain(tmp_path, {"container.entrypoint": "keep"})
    # The spec asks for 30000; the entrypoint reads PORT (default 8000) and ignores --port.
    assert setting(plan, "api_port") == ("8000", "profile")
    assert effective(plan, "port") == ("8000", "profile")
    assert effective(plan, "served_model_name") == ("/models/model", "profile")

    plan = explain(tmp_path, {"container.entrypoint": "keep", "container.env": {"PORT": 9000}})
    assert setting(plan, "api_port") == ("9000", "spec")
    assert head_env(plan)["PORT"] == ("9000", "spec")


@pytest.mark.parametrize("mode", ["bypass", "adapt", "keep"])
def test_text_explain_agrees_with_the_plan(tmp_path: Path, mode: str) -> None:
    plan = explain(tmp_path, {"container.entrypoint": mode})
    path = tmp_path / "spec.yaml"
    text = CliRunner().invoke(cli, ["explain", str(path)]).stdout
    value, source = setting(plan, "api_port")
    line = next(line for line in text.splitlines() if line.strip().startswith("api_port"))
    assert line.split()[1:3] == [value, source]
