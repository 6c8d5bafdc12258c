"""An operator's own image profiles: loaded from profiles/ beside the spec or --profiles, validated with
file:line:col, winning over the built-in ones; and `sparkc profile` drafting one from docker's metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.spec.profiles import load_user_profiles
from compiler.tools.profile_draft import parse_inspect
from tests.specs import dump, example, with_changes

INSPECT = [
    {
        "Id": "sha256:" + "ab" * 32,
        "Config": {
            "Entrypoint": ["/app/entrypoint.sh"],
            "Cmd": None,
            "Env": ["PATH=/usr/bin", "MODEL_PATH=/models/model", "PORT=8000", "MAX_MODEL_LEN=8192"],
            "ExposedPorts": {"8000/tcp": {}},
            "WorkingDir": "/app",
            "Labels": {"maintainer": "me"},
        },
    }
]
OWN = """\
family: our vLLM build
match: [registry.example/team/vllm]
engine: vllm
entrypoint: [/app/entrypoint.sh]
args: env-driven
controls:
  port: {env: PORT, default: "8000"}
ray: present
auto: adapt
sources: [our Dockerfile]
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write_spec(folder: Path, image: str, **changes: object) -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(dump(with_changes(example("solo-qwen3-32b"), {"container.image": image, **changes})))
    return spec


def test_own_profile_beside_the_spec_is_used_and_strict_passes(runner: CliRunner, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "registry.example/team/vllm:7")
    assert runner.invoke(cli, ["validate", "--strict", str(spec)]).exit_code == 1  # unknown image: a warning
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "team-vllm.yaml").write_text(OWN)
    assert runner.invoke(cli, ["validate", "--strict", str(spec)]).exit_code == 0
    explained = runner.invoke(cli, ["explain", "--format", "json", str(spec)])
    plan = json.loads(explained.output)
    assert plan["profile"] == "team-vllm" and plan["entrypoint_mode"] == "adapt"
    head = plan["nodes"][0]["env"]
    assert {"name": "PORT", "value": "8000"}.items() <= next(s for s in head if s["name"] == "PORT").items()
    assert any("your own, from profiles/team-vllm.yaml" in q for q in plan["quirks"])


def test_own_profile_takes_the_place_of_a_built_in_one(runner: CliRunner, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "vllm.yaml").write_text(OWN.replace("registry.example/team/vllm", "vllm/vllm-openai"))
    spec = write_spec(tmp_path, "vllm/vllm-openai:v0.11.2")
    result = runner.invoke(cli, ["explain", "--profiles", str(folder), str(spec)])
    assert result.exit_code == 0, result.output
    assert "profile vllm is your own, from mine/vllm.yaml; it takes the place of the built-in profile vllm-openai" in (
        result.output
    )
    assert "image vllm/vllm-openai:v0.11.2 (profile vllm), entrypoint adapt" in result.output


def test_broken_own_profile_is_reported_with_file_line_and_column(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.yaml").write_text(OWN.replace("args: env-driven", "args: envdriven"))
    spec = write_spec(tmp_path, "registry.example/team/vllm:7")
    result = runner.invoke(cli, ["compile", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"{tmp_path / 'profiles' / 'bad.yaml'}:5:7: args: " in result.output
    assert not (tmp_path / "out").exists()


def test_missing_profiles_folder_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "vllm/vllm-openai:v0.11.2")
    result = runner.invoke(cli, ["validate", "--profiles", str(tmp_path / "nope"), str(spec)])
    assert result.exit_code == 2 and "no such profiles folder" in result.output


def test_explicit_bypass_of_an_unknown_image_is_no_warning(runner: CliRunner, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "registry.example/other:1", **{"container.entrypoint": "bypass"})
    result = runner.invoke(cli, ["validate", "--strict", str(spec)])
    assert result.exit_code == 0 and "warning" not in result.output


def test_drafted_profile_is_valid_and_marks_what_to_review(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(
        cli, ["profile", "registry.example/team/vllm:7", "--inspect", "-"], input=json.dumps(INSPECT)
    )
    assert result.exit_code == 0, result.output
    assert "args: env-driven  # REVIEW" in result.output and "auto: bypass  # REVIEW" in result.output
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "team.yaml").write_text(result.output)
    (profile,) = load_user_profiles(tmp_path / "p")
    assert profile.match == ("registry.example/team/vllm",)
    assert profile.entrypoint == ("/app/entrypoint.sh",)
    assert (
        dict(profile.controls)["port"].env == "PORT" and dict(profile.controls)["model_path"].default == "/models/model"
    )


def test_drafted_profile_of_a_vllm_serve_image_takes_engine_args() -> None:
    facts = parse_inspect(json.dumps({"Config": {"Entrypoint": ["vllm", "serve"]}}), "vllm/vllm-openai:x")
    assert facts.entrypoint == ("vllm", "serve")
    runner = CliRunner()
    result = runner.invoke(
        cli, ["profile", "x/y", "--inspect", "-"], input=json.dumps({"Config": {"Entrypoint": ["vllm", "serve"]}})
    )
    assert "args: engine-args" in result.output


@pytest.mark.parametrize("text", ["not json", "[]", '{"Id": "x"}'])
def test_inspect_output_that_is_not_dockers_is_a_usage_error(runner: CliRunner, text: str) -> None:
    result = runner.invoke(cli, ["profile", "x/y", "--inspect", "-"], input=text)
    assert result.exit_code == 2 and "the inspect output of x/y" in result.output


def test_explain_prints_an_own_profiles_text_with_its_control_characters_escaped(
    runner: CliRunner, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, "registry.example/team/vllm:7")
    (tmp_path / "profiles").mkdir()
    hostile = OWN.replace("family: our vLLM build", 'family: "our \\e]0;title\\a build"')
    hostile += 'notes: ["clears \\e[2J\\r\\0"]\nside_effects: ["\\e[31mred"]\n'
    (tmp_path / "profiles" / "team-vllm.yaml").write_text(hostile)
    result = runner.invoke(cli, ["explain", str(spec)])
    assert result.exit_code == 0, result.output
    assert not any(c in result.output for c in "\x1b\x07\r\x00"), repr(result.output)
    assert "our \\x1b]0;title\\x07 build" in result.output and "clears \\x1b[2J\\r\\x00" in result.output
    assert "\\x1b[31mred" in result.output


SUM = "0123456789abcdef" * 4


def test_drafted_profile_records_the_entrypoints_sha256_and_the_launcher_checks_it(tmp_path: Path) -> None:
    from compiler.tools.profile_draft import draft

    facts = parse_inspect(json.dumps(INSPECT), "registry.example/team/vllm:7")
    text = draft(facts, SUM)
    assert f"entrypoint_sha256: {SUM}  # of /app/entrypoint.sh; a change stops the launch" in text
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "team.yaml").write_text(text.replace("auto: bypass", "auto: adapt"))
    (profile,) = load_user_profiles(tmp_path / "profiles")
    assert profile.entrypoint_sha256 == SUM
    runner = CliRunner()
    for mode, recorded in (("adapt", SUM), ("keep", SUM), ("bypass", "")):
        out = tmp_path / f"out-{mode}"
        spec = write_spec(tmp_path, "registry.example/team/vllm:7", **{"container.entrypoint": mode})
        result = runner.invoke(cli, ["compile", str(spec), "-o", str(out)])
        assert result.exit_code == 0, result.output
        launcher = (out / "deployment.sh").read_text()
        assert f"readonly SPARKC_ENTRYPOINT_SHA256={recorded or chr(39) * 2}\n" in launcher, mode
    # Without docker's image at hand the draft says how to record it.
    assert "# entrypoint_sha256: run sparkc profile registry.example/team/vllm:7 where docker has" in draft(facts)
