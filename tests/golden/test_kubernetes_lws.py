"""compile --target kubernetes-lws: one LeaderWorkerSet whose leader runs the head's container and whose one
worker template, given each worker's index and address, runs that worker's container exactly as the ssh
target does; valid against the LWS CRD's schema and Kubernetes' own; specs it cannot express are refused."""

from __future__ import annotations

import copy
import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.output.kubernetes import GPU_RESOURCE, HEALTH_PATH, KUSTOMIZATION, SUPPORTED_VERSIONS, secret_name
from compiler.output.kubernetes_lws import ADDRESS_VARIABLE, INDEX_VARIABLE, LWS_FILE, MAX_NAME
from compiler.pipeline import Beside, CompileResult, Target
from compiler.plan import NodePlan, Plan, Role, flat
from tests.specs import EXAMPLES, ROOT, compile_spec, diagnostics_text, example, with_changes

VALID = sorted(EXAMPLES.glob("*.yaml"))
CRD_SCHEMA = Path(__file__).resolve().parents[1] / "data" / "lws" / "leaderworkerset-v1.openapi.yaml"
# What one LeaderWorkerSet cannot run, and the spec field each refusal points at.
REFUSED = {
    "qwen3-32b-2spark-hooks": {"cluster.hooks", "container.hooks.patches"},
    "trtllm-qwen3-235b-2spark-mpi": {"engine.backend"},
    "llama33-70b-2spark-native": {"cluster.nodes"},  # spark-b is cabled to the other port
    "qwen3-32b-2spark-ray-crosscabled": {"cluster.nodes"},
}
ACCEPTED = [p for p in VALID if p.stem not in REFUSED]


def lws(spec: Any) -> CompileResult:
    return compile_spec(spec, target=Target.KUBERNETES_LWS)


@functools.cache
def lws_example(path: Path) -> CompileResult:
    text, name = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
    return compile_spec(text, name, beside=Beside(spec_dir=path.parent), target=Target.KUBERNETES_LWS)


@functools.cache
def ssh_plan(path: Path) -> Plan:
    text = path.read_text(encoding="utf-8")
    result = compile_spec(text, path.name, beside=Beside(spec_dir=path.parent), render_files=False)
    assert result.plan is not None
    return result.plan


def compiled(result: CompileResult) -> Plan:
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    return result.plan


def documents(result: CompileResult) -> list[dict[str, Any]]:
    found = []
    for name, text in sorted(result.files.items()):
        if name.startswith("kubernetes/"):
            found += [d for d in YAML(typ="safe").load_all(text) if d is not None]
    return found


def the_lws(result: CompileResult) -> dict[str, Any]:
    (found,) = [d for d in documents(result) if d["kind"] == "LeaderWorkerSet"]
    return found


def templates(result: CompileResult) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the leader's template or None, the workers' template)."""
    group = the_lws(result)["spec"]["leaderWorkerTemplate"]
    return group.get("leaderTemplate"), group["workerTemplate"]


def errors(result: CompileResult) -> list[str]:
    return [f"{'.'.join(map(str, d.path))}: {d.message}" for d in result.diagnostics if d.severity is Severity.ERROR]


def kubelet_expand(text: str, variables: dict[str, str]) -> str:
    """What the kubelet makes of a value or argument: `$$` is `$`, `$(NAME)` NAME's value where it is defined."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return variables.get(match.group(1), match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def started(template: dict[str, Any], node: NodePlan) -> tuple[list[str], list[tuple[str, str]]]:
    """The container's words and variables as `node`'s pod starts them: the LWS controller sets the index
    first, the downward API the node's address (taken here as the spec's, the cluster's requirement)."""
    (container,) = template["spec"]["containers"]
    variables = {INDEX_VARIABLE: str(node.rank)}
    env = []
    for entry in container["env"]:
        if "valueFrom" in entry:
            if entry["name"] == ADDRESS_VARIABLE:
                assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
                variables[ADDRESS_VARIABLE] = node.control_ip
            continue
        value = kubelet_expand(entry["value"], variables)  # a value sees the variables defined before it
        variables[entry["name"]] = value
        env.append((entry["name"], value))
    words = [kubelet_expand(w, variables) for w in container.get("command", []) + container.get("args", [])]
    return words, env


def docker_words(plan: Plan, node: NodePlan) -> list[str]:
    """The ssh target's --entrypoint (where one is given) and the words after the image."""
    words = flat(node.docker_run)
    image = words.index(plan.image)
    entry = [words[i + 1] for i in range(image) if words[i] == "--entrypoint"]
    return entry + list(words[image + 1 :])


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_lws_every_example_compiles_or_is_refused_by_name(path: Path) -> None:
    result = lws_example(path)
    refused = REFUSED.get(path.stem)
    if refused is None:
        compiled(result)
        assert set(result.files) == {KUSTOMIZATION, "kubernetes/service.yaml", LWS_FILE, "manifest.json"}
        return
    found = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert {".".join(map(str, d.path)) for d in found} == refused
    assert all(d.message.startswith("--target kubernetes-lws: ") and d.line > 0 for d in found)
    assert not result.files


def _strict(schema: Any) -> Any:
    """The CRD's schema as the API server's strict field validation reads it: an object that lists its
    fields takes no others (kubectl apply refuses unknown fields)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    lists_its_fields = "properties" in schema and "additionalProperties" not in schema
    if lists_its_fields and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator() -> jsonschema.protocols.Validator:
    schema = _strict(YAML(typ="safe").load(CRD_SCHEMA.read_text(encoding="utf-8")))
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    validator_class.check_schema(schema)
    validator: jsonschema.protocols.Validator = validator_class(schema)
    return validator


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_lws_object_valid_against_the_crd_schema(path: Path) -> None:
    problems = [
        f"{list(e.absolute_path)}: {e.message}" for e in crd_validator().iter_errors(the_lws(lws_example(path)))
    ]
    assert not problems


def test_lws_crd_schema_refuses_what_the_api_server_would() -> None:
    good = the_lws(lws_example(EXAMPLES / "qwen3-32b-3spark-mesh.yaml"))
    assert crd_validator().is_valid(good)
    for change in (
        lambda o: o["spec"]["leaderWorkerTemplate"].update(size="3"),
        lambda o: o["spec"].update(startupPolicy="WhenReady"),
        lambda o: o["spec"]["leaderWorkerTemplate"].update(restartPolicy="Always"),
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(hostNetwrok=True),
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].pop("containers"),
    ):
        bad = copy.deepcopy(good)
        change(bad)
        assert not crd_validator().is_valid(bad)


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_lws_pods_and_service_valid_for_every_supported_version(path: Path) -> None:
    import kubernetes_validate

    result = lws_example(path)
    service = [d for d in documents(result) if d["kind"] == "Service"]
    leader, worker = templates(result)
    pods = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **t["metadata"]}, "spec": t["spec"]}
        for t in (leader, worker)
        if t is not None
    ]
    for document in [*service, *pods]:
        for version in SUPPORTED_VERSIONS:
            kubernetes_validate.validate(document, version, strict=True)


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_lws_every_node_starts_the_ssh_targets_container(path: Path) -> None:
    """The leader runs the head's words and variables; the workers' one template, started with each
    worker's index and address, runs that worker's, word for word."""
    result = lws_example(path)
    plan = compiled(result)
    ssh = ssh_plan(path)
    leader, worker = templates(result)
    assert the_lws(result)["spec"]["leaderWorkerTemplate"]["size"] == len(plan.nodes)
    for node in ssh.nodes:
        template = worker if node.role is Role.WORKER or leader is None else leader
        words, env = started(template, node)
        assert env == [(s.name, s.value) for s in node.env]
        if node.role is Role.WORKER or not plan.ray_engine:
            assert words == docker_words(plan, node)


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_lws_leader_on_the_head_workers_one_a_node_with_the_gpus_and_probes(path: Path) -> None:
    result = lws_example(path)
    plan = compiled(result)
    leader, worker = templates(result)
    head = leader if leader is not None else worker
    assert head["spec"]["nodeSelector"] == {"kubernetes.io/hostname": plan.head}
    assert head["metadata"]["labels"]["sparkc.dev/role"] == "head"
    (engine,) = head["spec"]["containers"]
    assert {
        p: engine[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")
    } == dict.fromkeys(("startupProbe", "readinessProbe", "livenessProbe"), HEALTH_PATH)
    api = next(d for d in documents(result) if d["kind"] == "Service")
    assert api["spec"]["selector"] == {"app.kubernetes.io/instance": plan.name, "sparkc.dev/role": "head"}
    if leader is None:
        assert len(plan.nodes) == 1
        return
    spec = worker["spec"]
    workers = [n.name for n in plan.workers]
    if len(workers) == 1:
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": workers[0]}
    else:
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In", "values": workers}]
        (apart,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert apart == {
            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": plan.name}},
            "topologyKey": "kubernetes.io/hostname",
        }
    (container,) = spec["containers"]
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(container)
    assert container["resources"]["limits"][GPU_RESOURCE] == plan.workers[0].gpus
    for template in (leader, worker):
        assert template["spec"]["hostNetwork"] is True and template["spec"]["hostIPC"] is True


def test_lws_start_order_and_group_restart() -> None:
    result = lws_example(EXAMPLES / "seed-qwen35-122b-2spark-ray.yaml")
    plan = compiled(result)
    spec = the_lws(result)["spec"]
    # the head's engine answers /health only once the workers joined: they must not wait for it to be ready
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader, worker = templates(result)
    assert leader is not None
    (wait,) = worker["spec"]["initContainers"]
    assert wait["command"][-2:] == [plan.head_fabric_ip, str(plan.ray_port)]
    assert "initContainers" not in leader["spec"]
    assert leader["spec"]["containers"][0]["command"][:2] == ["sh", "-c"]


def test_lws_secrets_only_by_reference() -> None:
    secret = "value-that-must-never-be-written-0123456789"
    spec = with_changes(example("qwen3-32b-3spark-mesh"), {"container.secrets": ["HF_TOKEN"]})
    result = lws(spec)
    plan = compiled(result)
    for template in templates(result):
        assert template is not None
        (ref,) = [e for e in template["spec"]["containers"][0]["env"] if e["name"] == "HF_TOKEN"]
        assert ref == {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": secret_name(plan), "key": "HF_TOKEN"}},
        }
    assert all(secret not in text for text in result.files.values())


def test_lws_refuses_interface_names_that_differ_naming_the_nodes() -> None:
    spec = with_changes(
        example("qwen3-32b-3spark-mesh"),
        {"cluster.nodes.2.fabric.hcas": ["rocep1s0f0", "roceP2p1s0f0"]},
    )
    result = lws(spec)
    (message,) = errors(result)
    assert message.startswith("cluster.nodes: --target kubernetes-lws: the nodes' interface names differ: HCAs (")
    assert "spark-c: rocep1s0f0,roceP2p1s0f0" in message and "--target kubernetes" in message
    assert compiled(compile_spec(spec, target=Target.KUBERNETES)).nodes  # one StatefulSet per node takes it


def test_lws_refuses_a_worker_value_neither_rank_nor_address() -> None:
    # a per-node variable that differs between workers cannot come from one template
    spec = with_changes(example("qwen3-32b-3spark-mesh"), {"cluster.nodes.2.env": {"NCCL_IB_GID_INDEX": 5}})
    (message,) = errors(lws(spec))
    assert "the variable NCCL_IB_GID_INDEX differs between the workers (spark-b: unset; spark-c: 5)" in message
    # the same variable on the head alone is the leader's own: accepted
    head_only = with_changes(example("qwen3-32b-3spark-mesh"), {"cluster.nodes.0.env": {"NCCL_IB_GID_INDEX": 5}})
    compiled(lws(head_only))


def test_lws_longest_name_the_spec_allows_fits_the_controllers_objects() -> None:
    # the controller's worker StatefulSet is NAME-0, and its pods' revision label adds 11 characters to it
    mesh = example("qwen3-32b-3spark-mesh")
    assert not lws(with_changes(mesh, {"name": "a" * 41})).ok  # the spec's own limit
    longest = the_lws(lws(with_changes(mesh, {"name": "a" * 40})))["metadata"]["name"]
    assert len(longest) == 40 <= MAX_NAME
    assert len(f"{longest}-0") + 11 <= 63


def test_lws_kustomize_builds_the_folder(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the folder here")
    result = lws_example(EXAMPLES / "llama33-70b-4spark-ring.yaml")
    for name, text in result.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    built = subprocess.run(
        [kubectl, "kustomize", str(tmp_path / "kubernetes")], capture_output=True, text=True, check=True
    )
    assert sorted(d["kind"] for d in YAML(typ="safe").load_all(built.stdout) if d) == ["LeaderWorkerSet", "Service"]


def test_lws_cli_writes_the_folder_and_the_targets_replace_each_other(tmp_path: Path) -> None:
    runner = CliRunner()
    spec, out = str(EXAMPLES / "qwen3-32b-3spark-mesh.yaml"), tmp_path / "out"
    done = runner.invoke(cli, ["compile", spec, "--target", "kubernetes-lws", "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / LWS_FILE).is_file() and not (out / "kubernetes" / "node-spark-a.yaml").exists()
    again = runner.invoke(cli, ["compile", spec, "--target", "kubernetes", "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "kubernetes" / "node-spark-a.yaml").is_file() and not (out / LWS_FILE).exists()
    crossed = EXAMPLES / "qwen3-32b-2spark-ray-crosscabled.yaml"
    refused = runner.invoke(cli, ["compile", str(crossed), "--target", "kubernetes-lws", "-o", str(tmp_path / "t")])
    assert refused.exit_code == 1 and "cluster.nodes: --target kubernetes-lws: " in refused.output


def test_lws_same_spec_same_bytes() -> None:
    spec = example("llama33-70b-4spark-ring")
    first = lws(spec)
    assert first.ok and first.files == lws(spec).files


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_lws_output_matches_snapshot(path: Path, snapshot: Any) -> None:
    """The manifests as reviewed: a change to them shows in the snapshot's diff (--snapshot-update)."""
    result = lws_example(path)
    compiled(result)
    snapshot.snapshot_dir = Path(__file__).resolve().parent / "snapshots" / "kubernetes-lws" / path.stem
    for name, text in sorted(result.files.items()):
        if name.startswith("kubernetes/"):
            snapshot.assert_match(text, name.removeprefix("kubernetes/"))
