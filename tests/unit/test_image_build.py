"""container.build: build-image.sh is written only where the spec builds its image; its constants, PLAN.md's
order (build, distribute, launch) and the manifest say what it builds; a secret is never a build argument."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from tests.specs import compile_into, compile_spec, dump, example, with_changes

SOLO = example("solo-qwen3-32b")
BUILD = {
    "context": "/srv/spark-vllm-docker",
    "dockerfile": "docker/Dockerfile.wheels",
    "args": {"VLLM_REF": "v1", "X": 2},
}


def test_build_image_sh_is_written_only_for_a_built_image(tmp_path: Path) -> None:
    compile_into(SOLO, tmp_path / "pulled")
    assert not (tmp_path / "pulled" / "build-image.sh").exists()
    assert "build" not in json.loads((tmp_path / "pulled" / "manifest.json").read_text())["plan"]
    result = compile_into(with_changes(SOLO, {"container.build": BUILD}), tmp_path / "built")
    assert result.ok
    out = tmp_path / "built"
    constants = (out / "deployment.sh").read_text(encoding="utf-8")
    assert "SPARKC_BUILD_DOCKERFILE=/srv/spark-vllm-docker/docker/Dockerfile.wheels" in constants
    assert "SPARKC_BUILD_ARGS=(\n  VLLM_REF=v1\n  X=2\n)" in constants
    assert "build_main" in (out / "build-image.sh").read_text(encoding="utf-8")
    plan = json.loads((out / "manifest.json").read_text())["plan"]
    assert plan["build"] == {
        "context": "/srv/spark-vllm-docker",
        "dockerfile": "/srv/spark-vllm-docker/docker/Dockerfile.wheels",
        "args": ["VLLM_REF=v1", "X=2"],
    }
    page = (out / "PLAN.md").read_text(encoding="utf-8")
    build, distribute = page.index("run `build-image.sh` first"), page.index("then `distribute.sh` copies")
    assert build < distribute < page.index("then `launch-cluster.sh` starts them")


def test_a_build_argument_named_like_a_secret_is_refused() -> None:
    build = {"context": "/srv/spark-vllm-docker", "args": {"VLLM_REF": "v0.11.1", "HF_TOKEN": "hf_x"}}
    result = compile_spec(with_changes(SOLO, {"container.build": build}), "t.yaml", render_files=False)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert len(errors) == 1 and errors[0].path == ("container", "build", "args", "HF_TOKEN")
    assert "HF_TOKEN looks like a secret" in errors[0].message


def test_a_dockerfile_outside_the_context_is_refused() -> None:
    for dockerfile in ("../Dockerfile", "/etc/Dockerfile", "a/../../b"):
        build = {"context": "/srv/x", "dockerfile": dockerfile}
        result = compile_spec(with_changes(SOLO, {"container.build": build}), "t.yaml", render_files=False)
        errors = [d.message for d in result.diagnostics if d.severity is Severity.ERROR]
        assert len(errors) == 1 and "must be a path inside context" in errors[0], (dockerfile, errors)


def test_compile_says_to_build_and_distribute_before_the_launch(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(with_changes(SOLO, {"container.build": BUILD})), encoding="utf-8")
    out = CliRunner().invoke(cli, ["compile", str(spec), "-o", str(tmp_path / "out")]).output
    built = (
        f"run {tmp_path}/out/build-image.sh, then {tmp_path}/out/distribute.sh, then {tmp_path}/out/launch-cluster.sh"
    )
    assert built in out
