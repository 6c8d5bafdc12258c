"""compile --target kubernetes: the manifests run what the ssh target's containers run, pinned, ordered and
probed, valid for every Kubernetes version sparkc supports; specs it cannot express get a clear error."""

from __future__ import annotations

import functools
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.output.kubernetes import (
    GPU_RESOURCE,
    HEALTH_PATH,
    KUSTOMIZATION,
    RDMA_RESOURCE,
    SUPPORTED_VERSIONS,
    node_file,
    object_name,
    secret_name,
)
from compiler.pipeline import Beside, CompileResult, Target
from compiler.plan import Plan, Role, flat
from tests.specs import EXAMPLES, ROOT, compile_spec, diagnostics_text, example, with_changes

VALID = sorted(EXAMPLES.glob("*.yaml"))
# What the Kubernetes target cannot run, and the spec field each refusal points at.
REFUSED = {
    "qwen3-32b-2spark-hooks": {"cluster.hooks", "container.hooks.patches"},
    "trtllm-qwen3-235b-2spark-mpi": {"engine.backend"},
}


def kubernetes(spec: Any, path: Path | None = None) -> CompileResult:
    if path is not None:
        return _example(path)
    return compile_spec(spec, target=Target.KUBERNETES)


@functools.cache
def _example(path: Path) -> CompileResult:
    """An example compiled once for all the tests that read it (none changes a result)."""
    text, name = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
    return compile_spec(text, name, beside=Beside(spec_dir=path.parent), target=Target.KUBERNETES)


def documents(result: CompileResult) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe")
    found = []
    for name, text in sorted(result.files.items()):
        if name.startswith("kubernetes/"):
            found += [d for d in yaml.load_all(text) if d is not None]
    return found


def stateful_sets(result: CompileResult) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents(result) if d["kind"] == "StatefulSet"}


def pod(plan: Plan, result: CompileResult, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = stateful_sets(result)[f"{plan.name}-{node}"]["spec"]["template"]["spec"]
    return spec


def engine(plan: Plan, result: CompileResult, node: str) -> dict[str, Any]:
    container: dict[str, Any] = pod(plan, result, node)["containers"][0]
    return container


def entrypoint_and_args(plan: Plan, docker_run: Any) -> tuple[list[str], list[str]]:
    """docker's --entrypoint (as a list, empty where none) and the words after the image."""
    words = flat(docker_run)
    image = words.index(plan.image)
    entry = [words[i + 1] for i in range(image) if words[i] == "--entrypoint"]
    return entry, list(words[image + 1 :])


def compiled(result: CompileResult) -> Plan:
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    return result.plan


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_kubernetes_every_example_compiles_or_is_refused_by_name(path: Path) -> None:
    result = kubernetes(None, path)
    refused = REFUSED.get(path.stem)
    if refused is None:
        plan = compiled(result)
        assert set(result.files) == {
            KUSTOMIZATION,
            "kubernetes/service.yaml",
            "manifest.json",
            *(f"kubernetes/{node_file(n)}" for n in plan.nodes),
        }
        return
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert {".".join(map(str, d.path)) for d in errors} == refused
    assert all(d.message.startswith("--target kubernetes: ") and d.line > 0 for d in errors)
    assert not result.files


@pytest.mark.parametrize("path", [p for p in VALID if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_kubernetes_manifests_valid_for_every_supported_version(path: Path) -> None:
    import kubernetes_validate

    found = documents(kubernetes(None, path))
    assert {d["kind"] for d in found} >= {"StatefulSet", "Service", "Kustomization"}
    for document in found:
        if document["kind"] == "Kustomization":
            continue  # kustomize's own file: `kubectl kustomize` reads it below
        for version in SUPPORTED_VERSIONS:
            kubernetes_validate.validate(document, version, strict=True)


@pytest.mark.parametrize("path", [p for p in VALID if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_kubernetes_kustomize_builds_the_folder(path: Path, tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the folder here")
    result = kubernetes(None, path)
    for name, text in result.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    built = subprocess.run(
        [kubectl, "kustomize", str(tmp_path / "kubernetes")], capture_output=True, text=True, check=True
    )
    kinds = [d["kind"] for d in YAML(typ="safe").load_all(built.stdout) if d]
    plan = compiled(result)
    assert sorted(kinds) == sorted(["Service", "Service"] + ["StatefulSet"] * len(plan.nodes))


@pytest.mark.parametrize("path", [p for p in VALID if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_kubernetes_env_equals_the_ssh_targets(path: Path) -> None:
    result = kubernetes(None, path)
    ssh = compile_spec(
        path.read_text(encoding="utf-8"), path.name, beside=Beside(spec_dir=path.parent), render_files=False
    )
    assert ssh.plan is not None
    plan = compiled(result)
    for node in ssh.plan.nodes:
        env = engine(plan, result, node.name)["env"]
        values = [(e["name"], kubelet_expanded(e["value"])) for e in env if "value" in e]
        assert values == [(s.name, s.value) for s in node.env]
        refs = [e for e in env if "valueFrom" in e]
        assert [e["name"] for e in refs] == list(ssh.plan.secrets)


@pytest.mark.parametrize("path", [p for p in VALID if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_kubernetes_pods_pinned_on_host_network_with_the_gpus_and_weights(path: Path) -> None:
    result = kubernetes(None, path)
    plan = compiled(result)
    assert len(stateful_sets(result)) == len(plan.nodes)
    for node in plan.nodes:
        spec = pod(plan, result, node.name)
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": node.name}
        assert spec["hostNetwork"] is True and spec["hostIPC"] is True
        container = spec["containers"][0]
        assert container["resources"]["limits"][GPU_RESOURCE] == node.gpus
        if plan.model.hf == "":  # the weights' own folder, read-only (a cache mounts its snapshot and blobs)
            sources = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
            mounted = [m for m in container["volumeMounts"] if sources[m["name"]] == plan.model_host_path]
            assert [m.get("readOnly") for m in mounted] == [True]


def test_kubernetes_probes_on_the_heads_health_sized_from_the_launch_timeout() -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"engine.port": 9123, "launch.timeout": 905})
    result = kubernetes(spec)
    plan = compiled(result)
    head = engine(plan, result, plan.head)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert head[probe]["httpGet"] == {"path": HEALTH_PATH, "port": 9123}
    startup = head["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 905
    assert startup["periodSeconds"] * (startup["failureThreshold"] - 1) < 905
    assert math.ceil(905 / startup["periodSeconds"]) == startup["failureThreshold"]
    for worker in plan.workers:
        assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(engine(plan, result, worker.name))
    api = next(d for d in documents(result) if d["kind"] == "Service" and d["metadata"]["name"] == f"{plan.name}-api")
    assert api["spec"]["ports"][0]["port"] == 9123
    assert api["spec"]["selector"] == {"app.kubernetes.io/instance": plan.name, "sparkc.dev/role": "head"}


def test_kubernetes_secrets_only_by_reference() -> None:
    secret = "value-that-must-never-be-written-0123456789"
    spec = with_changes(example("llama33-70b-2spark-native"), {"container.secrets": ["HF_TOKEN", "OTHER_TOKEN"]})
    result = kubernetes(spec)
    plan = compiled(result)
    for node in plan.nodes:
        refs = {e["name"]: e for e in engine(plan, result, node.name)["env"] if e["name"] in plan.secrets}
        assert set(refs) == {"HF_TOKEN", "OTHER_TOKEN"}
        for name, entry in refs.items():
            assert "value" not in entry
            assert entry["valueFrom"] == {"secretKeyRef": {"name": secret_name(plan), "key": name}}
    assert not any(d["kind"] == "Secret" for d in documents(result))
    assert all(secret not in text for text in result.files.values())


def test_kubernetes_ray_head_starts_before_the_workers_and_runs_the_engine() -> None:
    result = kubernetes(None, EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml")
    plan = compiled(result)
    for worker in plan.workers:
        (wait,) = pod(plan, result, worker.name)["initContainers"]
        assert wait["command"][-2:] == [plan.head_fabric_ip, str(plan.ray_port)]
        assert wait["image"] == plan.image
        # the worker's own command is the ssh target's, word for word
        container = engine(plan, result, worker.name)
        assert (container["command"], container["args"]) == entrypoint_and_args(plan, worker.docker_run)
    head = engine(plan, result, plan.head)
    assert "initContainers" not in pod(plan, result, plan.head)
    assert head["command"][:2] == ["sh", "-c"]
    script = head["command"][2]
    first = script.splitlines()[0]
    assert first.startswith("ray start --head ") and "--block" not in first
    assert script.rstrip().endswith('exec "$@"')
    assert head["args"] == list(flat(plan.ray_engine))


def test_kubernetes_native_ranks_run_the_ssh_targets_command_without_waits() -> None:
    result = kubernetes(None, EXAMPLES / "llama33-70b-2spark-native.yaml")
    plan = compiled(result)
    for node in plan.nodes:
        assert "initContainers" not in pod(plan, result, node.name)
        container = engine(plan, result, node.name)
        assert (container.get("command", []), container.get("args", [])) == entrypoint_and_args(plan, node.docker_run)
        assert (node.role is Role.HEAD) == ("startupProbe" in container)


def test_kubernetes_unprivileged_asks_for_rdma_and_ipc_lock() -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"container.privileged": False})
    result = kubernetes(spec)
    plan = compiled(result)
    for node in plan.nodes:
        container = engine(plan, result, node.name)
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert container["resources"]["limits"][RDMA_RESOURCE] == 1
    privileged = kubernetes(example("llama33-70b-2spark-native"))
    plan = compiled(privileged)
    head = engine(plan, privileged, plan.head)
    assert head["securityContext"] == {"privileged": True}
    assert RDMA_RESOURCE not in head["resources"]["limits"]


def test_kubernetes_refuses_a_branch_of_a_hugging_face_cache() -> None:
    spec = with_changes(example("llama33-70b-draft-2spark"), {"model.revision": "main"})
    result = kubernetes(spec)
    assert not result.ok
    assert [".".join(map(str, d.path)) for d in result.diagnostics if d.severity is Severity.ERROR] == [
        "model.revision"
    ]


def test_kubernetes_refuses_names_too_long_for_a_stateful_set() -> None:
    spec = with_changes(example("solo-qwen3-32b"), {"name": "a" * 40, "cluster.nodes.0.name": "b" * 20})
    result = kubernetes(spec)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert [d.path for d in errors] == [("name",)]
    assert "61 characters" in errors[0].message
    short = compiled(kubernetes(with_changes(example("solo-qwen3-32b"), {"name": "a" * 30})))
    assert len(object_name(short, short.nodes[0])) <= 52


def test_kubernetes_same_spec_same_bytes() -> None:
    spec = example("qwen3-32b-2spark-ray-crosscabled")
    first = kubernetes(spec)
    assert first.ok and first.files == kubernetes(spec).files


def test_kubernetes_cli_writes_the_folder_and_refuses_with_exit_1(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    done = runner.invoke(
        cli, ["compile", str(EXAMPLES / "solo-qwen3-32b.yaml"), "--target", "kubernetes", "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert (out / KUSTOMIZATION).is_file() and not (out / "launch-cluster.sh").exists()
    # the ssh target into the same folder replaces the manifests (they are the compile's own files)
    again = runner.invoke(cli, ["compile", str(EXAMPLES / "solo-qwen3-32b.yaml"), "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "launch-cluster.sh").is_file() and not (out / "kubernetes").exists()
    spec = EXAMPLES / "trtllm-qwen3-235b-2spark-mpi.yaml"
    refused = runner.invoke(cli, ["compile", str(spec), "--target", "kubernetes", "-o", str(tmp_path / "t")])
    assert refused.exit_code == 1
    assert f"{spec}:" in refused.output and "engine.backend: --target kubernetes: backend mpi" in refused.output


def test_kubernetes_ray_head_script_passes_shellcheck(tmp_path: Path) -> None:
    from compiler.output.lint import shellcheck_binary

    result = kubernetes(None, EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml")
    plan = compiled(result)
    script = tmp_path / "ray-head.sh"
    script.write_text("#!/bin/sh\n" + engine(plan, result, plan.head)["command"][2], encoding="utf-8")
    checked = subprocess.run([shellcheck_binary(), "--norc", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0


def test_kubernetes_check_compares_against_the_target_written(tmp_path: Path) -> None:
    runner = CliRunner()
    spec, out = str(EXAMPLES / "solo-qwen3-32b.yaml"), str(tmp_path / "out")
    assert runner.invoke(cli, ["compile", spec, "--target", "kubernetes", "-o", out]).exit_code == 0
    same = runner.invoke(cli, ["compile", spec, "--target", "kubernetes", "--check", "-o", out])
    assert same.exit_code == 0, same.output
    other = runner.invoke(cli, ["compile", spec, "--check", "-o", out])
    assert other.exit_code == 1 and "launch-cluster.sh" in other.output


def test_kubernetes_dollar_words_reach_the_container_as_written() -> None:
    # the kubelet turns $(NAME) into NAME's value and $$ into $: the manifests escape both
    spec = with_changes(example("solo-qwen3-32b"), {"container.env": {"EXTRA_ARGS": "a$(HOME)b$$c$d"}})
    result = kubernetes(spec)
    plan = compiled(result)
    (value,) = [e["value"] for e in engine(plan, result, plan.head)["env"] if e["name"] == "EXTRA_ARGS"]
    assert kubelet_expanded(value) == "a$(HOME)b$$c$d"
    assert kubelet_expanded("a$(HOME)b") != "a$(HOME)b"  # unescaped, the kubelet would expand it


def kubelet_expanded(text: str) -> str:
    """What the kubelet makes of `text`: `$$` is `$`, `$(` starts a variable (marked here), the rest as it is."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$(", i):
            out.append("<variable>")
            i += 2
        elif text.startswith("$$", i):
            out.append("$")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def test_kubernetes_reading_docker_run_refuses_an_option_it_does_not_know() -> None:
    # a new docker option in the ssh target must be carried to Kubernetes deliberately, never dropped
    from compiler.output.docker_words import read_docker_run

    plan = compiled(kubernetes(None, EXAMPLES / "solo-qwen3-32b.yaml"))
    node = plan.nodes[0]
    assert read_docker_run(node.docker_run, plan.image).image == plan.image
    with pytest.raises(ValueError, match="--shm-size"):
        read_docker_run((node.docker_run[0], ("--shm-size", "1g"), *node.docker_run[1:]), plan.image)


@pytest.mark.parametrize("path", [p for p in VALID if p.stem not in REFUSED], ids=lambda p: p.stem)
def test_kubernetes_output_matches_snapshot(path: Path, snapshot: Any) -> None:
    """The manifests as reviewed: a change to them shows in the snapshot's diff (--snapshot-update)."""
    result = kubernetes(None, path)
    compiled(result)
    snapshot.snapshot_dir = Path(__file__).resolve().parent / "snapshots" / "kubernetes" / path.stem
    for name, text in sorted(result.files.items()):
        if name.startswith("kubernetes/"):
            snapshot.assert_match(text, name.removeprefix("kubernetes/"))
