"""container.mounts under ~/: the ssh user's home on each node, as recipes' launchers read a `docker run -v ~/...`
through each node's shell. The spec keeps the ~/ form (PLAN.md, the manifest, the docker words); the launcher
puts each node's home in; other targets expand it in the job or refuse it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.pipeline import Target
from compiler.plan import HomeMount
from tests.specs import compile_spec, dump, example, with_changes

SOLO = "solo-qwen3-32b"
HOME_CACHE = {"host": "~/.cache/huggingface", "container": "/root/.cache/huggingface", "readonly": False}
HOME_MODELS = {"host": "~/models", "container": "/models"}


def _with_mounts(*mounts: dict[str, Any], base: str = SOLO) -> dict[str, Any]:
    return with_changes(example(base), {"container.mounts": list(mounts)})


def _errors(spec: dict[str, Any], target: Target = Target.SSH) -> list[str]:
    result = compile_spec(spec, render_files=False, target=target)
    return [f"{d.line}:{d.column}: {d.message}" for d in result.diagnostics if d.severity is Severity.ERROR]


def test_a_mount_under_home_is_kept_as_written_in_the_docker_words_the_page_and_the_manifest() -> None:
    result = compile_spec(_with_mounts(HOME_CACHE, HOME_MODELS))
    assert result.ok and result.plan is not None
    assert result.plan.home_mounts == (HomeMount(0, "~/.cache/huggingface"), HomeMount(1, "~/models"))
    run = result.plan.nodes[0].docker_run
    assert ("-v", "~/.cache/huggingface:/root/.cache/huggingface") in run and ("-v", "~/models:/models:ro") in run
    assert "~/.cache/huggingface:/root/.cache/huggingface" in result.files["PLAN.md"]
    assert "`~/` in a mount's host path is the home of the ssh user on each node" in result.files["PLAN.md"]
    manifest = json.loads(result.files["manifest.json"])
    assert ["-v", "~/models:/models:ro"] in manifest["plan"]["bench"]["mounts"]
    assert "readonly SPARKC_HOME_PLACEHOLDER=\\~\n" in result.files["deployment.sh"]


def test_without_a_mount_under_home_the_launcher_asks_no_node() -> None:
    result = compile_spec(_with_mounts({"host": "/srv/models", "container": "/models"}))
    assert result.ok and result.plan is not None and result.plan.home_mounts == ()
    assert "readonly SPARKC_HOME_PLACEHOLDER=''" in result.files["deployment.sh"]


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("~aurora/models", "for aurora's own folder write its absolute path, such as /home/aurora/models"),
        ("~root", "such as /home/root/FOLDER"),
        ("~", "is the whole home of the ssh user: name a folder inside it"),
        ("~/a:b", "must not contain ':'"),
        ("models", "must be an absolute path (starting with '/') or one in the ssh user's home (starting with '~/')"),
    ],
)
def test_a_home_form_other_than_tilde_slash_is_refused_with_what_to_write(host: str, says: str) -> None:
    spec = _with_mounts({"host": host, "container": "/models"})
    text = dump(spec)
    [error] = _errors(spec)
    line = int(error.split(":")[0])
    assert says in error and host in text.splitlines()[line - 1], error


@pytest.mark.parametrize(
    ("host", "says"),
    [
        ("~/", "must not be the home folder itself"),
        ("~/.", "must not be the home folder itself"),
        ("~/.ssh", "must not be ~/.ssh or inside it"),
        ("~/.ssh/id_ed25519", "must not be ~/.ssh or inside it"),
        ("~/./.gnupg", "must not be ~/.gnupg or inside it"),
        ("~/../..", "must not contain '..' segments"),
        ("~/models/../../../etc", "must not contain '..' segments"),
    ],
)
def test_a_mount_under_home_that_names_the_keys_or_climbs_out_is_refused(host: str, says: str) -> None:
    for readonly in (True, False):
        [error] = _errors(_with_mounts({"host": host, "container": "/models", "readonly": readonly}))
        assert says in error, error


def test_other_host_paths_still_refuse_tilde() -> None:
    [error] = _errors(with_changes(example(SOLO), {"model.path": "~/models/x"}))
    assert "'~' is not expanded" in error


@pytest.mark.parametrize("target", [Target.KUBERNETES, Target.KUBERNETES_LWS])
def test_kubernetes_refuses_a_mount_under_home_with_what_to_write(target: Target) -> None:
    spec = _with_mounts({"host": "/srv/x", "container": "/x"}, HOME_CACHE, base="qwen3-32b-2spark-control-data")
    errors = _errors(spec, target)
    assert any("hostPath volume needs an absolute path" in e and "/home/USER/.cache/huggingface" in e for e in errors)
    assert len([e for e in errors if "hostPath volume" in e]) == 1


def test_slurm_puts_the_jobs_home_for_tilde_in_the_task() -> None:
    result = compile_spec(_with_mounts(HOME_CACHE), target=Target.SLURM)
    assert result.ok, [d.message for d in result.diagnostics]
    [script] = [text for name, text in result.files.items() if name.endswith(".sbatch")]
    assert "-v \\~/.cache/huggingface:/root/.cache/huggingface\n" in script
    assert "run[i]=$HOME/${run[i]#\\~/}" in script
    assert "container.mounts under ~/ are in the job's user's home on each node" in script
