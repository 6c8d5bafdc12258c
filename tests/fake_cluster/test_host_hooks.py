"""cluster.hooks: commands run on every node's host over ssh before any container starts, shown
in the dry run, explain, PLAN.md and the manifest; the first that fails stops the launch, naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.output.explain_view import explain_text
from tests.fakes.cluster import FakeCluster
from tests.specs import compile_spec, diagnostics_text, example, with_changes

NATIVE = "llama33-70b-2spark-native.yaml"
CAP = "nvidia-smi -lgc 200,2150"


def hooked(spec: dict[str, object], *commands: str, sudo: bool = False) -> dict[str, object]:
    return with_changes(spec, {"cluster.hooks": {"pre_launch": list(commands), "sudo": sudo}})


def test_the_plan_page_explain_and_manifest_show_the_hooks_and_their_hash() -> None:
    result = compile_spec(hooked(example(NATIVE), CAP, "sysctl -w vm.swappiness=1", sudo=True))
    plan = result.plan
    assert plan is not None and plan.host_hooks is not None
    assert plan.host_hooks.nodes == ("spark-a", "spark-b") and plan.host_hooks.sudo
    page = result.files["PLAN.md"]
    assert "as root, through sudo -n" in page and f"1. `{CAP}`" in page and plan.host_hooks.sha256 in page
    manifest = json.loads(result.files["manifest.json"])["plan"]["host_hooks"]
    assert manifest["pre_launch"] == [CAP, "sysctl -w vm.swappiness=1"] and manifest["sha256"] == plan.host_hooks.sha256
    shown = explain_text(plan)
    assert f"on spark-b: pre_launch[0]: {CAP}" in shown and f"on spark-a: pre_launch[0]: {CAP}" in shown
    # another command, or the same ones run otherwise, is another hash
    other = compile_spec(hooked(example(NATIVE), CAP, "sysctl -w vm.swappiness=1")).plan
    assert other is not None and other.host_hooks is not None and other.host_hooks.sha256 != plan.host_hooks.sha256


def test_a_spec_without_hooks_has_none_in_its_manifest() -> None:
    result = compile_spec(example(NATIVE))
    assert "host_hooks" not in json.loads(result.files["manifest.json"])["plan"]


@pytest.mark.parametrize(
    ("hooks", "expected"),
    [
        ({"pre_launch": [""]}, "cluster.hooks.pre_launch[0]: must not be empty"),
        ({"pre_launch": "nvidia-smi -pm 1"}, "cluster.hooks.pre_launch:"),
        ({"pre_launch": [CAP], "sudo": "yes"}, "cluster.hooks.sudo:"),
        ({"pre_start": [CAP]}, "unknown key 'pre_start'; allowed: pre_launch, sudo"),
    ],
)
def test_bad_hooks_are_refused_at_their_line(hooks: dict[str, object], expected: str) -> None:
    result = compile_spec(with_changes(example(NATIVE), {"cluster.hooks": hooks}))
    assert result.plan is None
    text = diagnostics_text(result)
    assert expected in text and text.startswith("spec.yaml:"), text


def test_dry_run_prints_each_hook_per_node_and_runs_nothing(fake: FakeCluster) -> None:
    spec = fake.adapt(NATIVE)
    fake.compile(hooked(spec, CAP, sudo=True))
    dry = fake.run("launch-cluster.sh", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"[spark-a] sudo -n sh -c '{CAP}'" in dry.stdout and f"[spark-b] sudo -n sh -c '{CAP}'" in dry.stdout
    assert not fake.ssh_calls() and not fake.docker_calls()


def test_hooks_run_on_every_host_in_order_before_any_container(fake: FakeCluster, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    spec = fake.adapt(NATIVE)
    # the fake ssh gives the remote command FAKE_NODE; on the head the hook runs locally
    fake.compile(
        hooked(spec, f'echo "first ${{FAKE_NODE:-head}}" >> {ran}', f'echo "second ${{FAKE_NODE:-head}}" >> {ran}')
    )
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert ran.read_text().splitlines() == ["first head", "second head", "first spark-b", "second spark-b"]
    assert "spark-b: host hook pre_launch[1] done" in launch.stdout + launch.stderr
    hook_calls = [i for i, c in enumerate(fake.calls()) if c.startswith("ssh") and "sh -c echo" in c]
    first_run = next(i for i, c in enumerate(fake.calls()) if '"run", "-d"' in c)
    assert hook_calls and max(hook_calls) < first_run


def test_the_first_failing_hook_stops_the_launch_naming_node_and_command(fake: FakeCluster, tmp_path: Path) -> None:
    after = tmp_path / "after"
    spec = fake.adapt(NATIVE)
    failing = 'if [ "${FAKE_NODE:-}" = spark-b ]; then echo "no permission" >&2; exit 3; fi'
    fake.compile(hooked(spec, failing, f"touch {after}"))
    launch = fake.run("launch-cluster.sh", "--no-probe")
    assert launch.returncode == 1
    assert "FAILED in phase hooks on node spark-b" in launch.stderr
    assert f"host hook pre_launch[0] failed on spark-b with status 3: {failing}" in launch.stderr
    assert "no permission" in launch.stderr
    # the head ran both; spark-b stopped at the first; no container started anywhere
    assert after.exists() and not any(argv[:2] == ["run", "-d"] for _, argv in fake.docker_calls())
