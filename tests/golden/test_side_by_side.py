"""Several deployments on one cluster: `sparkc compile A B -o OUT` checks them together (names, ports,
memory on the nodes they share), each container says on its labels what it takes of its node, and the
launcher's preflight budgets what already runs there and tells sparkc's containers from foreign GPU users."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.output.library import library_path
from compiler.pipeline import Beside
from compiler.plan import flat
from tests.fakes.cluster import FakeCluster
from tests.golden.test_examples import SNAPSHOTS, nested
from tests.specs import DELETE, EXAMPLES, ROOT, compile_spec, diagnostics_text, dump, example, with_changes

PAIR = EXAMPLES / "side-by-side"
BIG, SMALL = "llama33-70b-fp8-both.yaml", "qwen3-8b-beside.yaml"


def _pair(tmp_path: Path, big: dict[str, Any] | None = None, small: dict[str, Any] | None = None) -> Path:
    """The side-by-side example folder in tmp_path, each spec with its changes."""
    folder = tmp_path / "pair"
    shutil.copytree(PAIR, folder)
    for name, changes in ((BIG, big), (SMALL, small)):
        if changes:
            spec = with_changes(example(f"side-by-side/{name}"), changes)
            (folder / name).write_text(dump(spec))
    return folder


def _compile(folder: Path, *names: str, command: str = "compile") -> Any:
    args = [command, *(str(folder / n) for n in names or (BIG, SMALL))]
    if command == "compile":
        args += ["-o", str(folder / "out")]
    return CliRunner().invoke(cli, args)


def _line(path: Path, starts: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(starts))


def test_the_pair_compiles_into_one_folder_per_deployment(tmp_path: Path) -> None:
    folder = _pair(tmp_path)
    result = _compile(folder)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["gateway", "llama33-70b", "qwen3-8b"]
    small = json.loads((folder / "out" / "qwen3-8b" / "manifest.json").read_text())
    assert [n["name"] for n in small["plan"]["nodes"]] == ["spark-a"]  # cluster.nodes picks from the file
    specs = [str(folder / BIG), str(folder / SMALL)]
    again = CliRunner().invoke(cli, ["compile", *specs, "-o", str(folder / "out"), "--check"])
    assert again.exit_code == 0, again.output
    assert CliRunner().invoke(cli, ["validate", *specs]).exit_code == 0


@pytest.mark.parametrize("name", [BIG, SMALL])
def test_the_pair_matches_its_snapshot(name: str, snapshot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the files record the cluster file as the spec names it, from any folder
    path = PAIR.relative_to(ROOT) / name
    result = compile_spec(path.read_text(), str(path), beside=Beside(spec_dir=path.parent))
    assert result.ok and result.plan, diagnostics_text(result, str(path))
    library = library_path(result.plan.sparkc_version)
    snapshot.snapshot_dir = SNAPSHOTS / "examples"
    snapshot.assert_match_dir(
        nested({k: v for k, v in result.files.items() if k != library}), f"side-by-side-{path.stem}"
    )


def test_labels_say_what_each_container_takes_of_its_node() -> None:
    result = compile_spec((PAIR / BIG).read_text(), str(PAIR / BIG))
    assert result.ok and result.plan
    head, worker = (flat(n.docker_run) for n in result.plan.nodes)
    # 0.45 of 128 GB per node and vLLM's 9 GiB init; the API and the rendezvous on the head only (vLLM's
    # headless rank serves nothing)
    assert "sparkc.memory-budget=67263676416" in head and "sparkc.memory-budget=67263676416" in worker
    assert {"sparkc.api-port=8000", "sparkc.ports=29501", "sparkc.endpoint-host=spark-a.local"} <= set(head)
    assert not any(w.startswith(("sparkc.api-port=", "sparkc.ports=")) for w in worker)


def test_a_port_and_memory_clash_is_refused_at_each_spec_naming_the_numbers(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"engine.port": 8000, "engine.gpu_memory_utilization": 0.5})
    result = _compile(folder)
    assert result.exit_code == 1 and not (folder / "out").exists()
    small, big = folder / SMALL, folder / BIG
    port = f"{small}:{_line(small, 'port:')}:9: engine.port: port 8000 on spark-a is qwen3-8b's API port"
    assert port in result.output and f"llama33-70b ({BIG})" in result.output
    numbers = (
        "llama33-70b 67.3 GB (gpu_memory_utilization 0.45 x 128 GB + 9.7 GB of vLLM's own init) + qwen3-8b 73.7 GB"
    )
    for path in (big, small):
        at = f"{path}:{_line(path, 'gpu_memory_utilization:')}:27: engine.gpu_memory_utilization: spark-a cannot hold"
        assert at in result.output, result.output
    assert numbers in result.output
    assert "= 140.9 GB, more than its 128 GB less 12 GB for the OS (116.0 GB)" in result.output


def test_the_same_name_and_two_ray_heads_on_one_node_are_refused(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"name": "llama33-70b"})
    result = _compile(folder, command="validate")
    small = folder / SMALL
    assert result.exit_code == 1
    name = f"{small}:{_line(small, 'name:')}:7: name: deployment 'llama33-70b' is also the deployment in {BIG}"
    assert name in result.output
    ray = {"engine.backend": "ray"}
    folder = _pair(tmp_path / "ray", big=ray, small={**ray, "container.entrypoint": "bypass"})
    result = _compile(folder, command="validate")
    assert result.exit_code == 1
    assert "port 8265 on spark-a is qwen3-8b's Ray dashboard port" in result.output
    assert "two Ray clusters cannot share spark-a on Ray's fixed ports: use engine.backend: native" in result.output


def test_a_node_the_cluster_file_lacks_is_refused_at_the_spec(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"cluster.nodes": ["spark-a", "spark-c"]})
    result = _compile(folder, SMALL, command="validate")
    line = _line(folder / SMALL, "- spark-c")
    assert result.exit_code == 1
    assert f"{folder / SMALL}:{line}:" in result.output
    assert "'spark-c' is not a node of the cluster file (it has: spark-a, spark-b)" in result.output


# -- preflight, on the fakes ------------------------------------------------------------------------


def _running(fake: FakeCluster, spec: dict[str, Any], node: str, container_id: str) -> None:
    """A container of another deployment running on the node, with the labels its own compile gives it."""
    result = compile_spec(spec, "other.yaml")
    assert result.ok and result.plan
    words = flat(next(n for n in result.plan.nodes if n.name == node).docker_run)
    labels = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--label")
    name = f"sparkc-{spec['name']}-{node}"
    meta = {"name": name, "id": container_id, "labels": labels, "status": "running", "env": {}, "words": list(words)}
    (fake.state / "nodes" / node / "containers" / name).mkdir(parents=True)
    (fake.state / "nodes" / node / "containers" / name / "meta.json").write_text(json.dumps(meta))


def _beside(fake: FakeCluster, fraction: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The solo example on the fakes and another deployment already running on its node."""
    spec = fake.adapt("solo-qwen3-32b")
    spec = with_changes(spec, {"engine.gpu_memory_utilization": fraction})
    fake.compile(spec)
    other = with_changes(spec, {"name": "other", "engine.port": spec["engine"]["port"] + 1})
    other = with_changes(other, {"engine.gpu_memory_utilization": 0.4})
    return spec, other


@pytest.mark.parametrize(("fraction", "fits"), [(0.3, True), (0.4, False)])
def test_preflight_budgets_the_deployments_running_on_the_node(fake: FakeCluster, fraction: float, fits: bool) -> None:
    spec, other = _beside(fake, fraction)
    node = spec["cluster"]["nodes"][0]["name"]
    _running(fake, other, node, "c" * 64)
    result = fake.run("launch-cluster.sh", "--preflight-only")
    if fits:
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"{node}: qwen3-32b (48.0 GB) beside other 60.8 GB: 108.9 GB of 116.0 GB for engines" in result.stdout
        return
    assert result.returncode == 1
    assert (
        f"{node} cannot hold qwen3-32b (60.8 GB) beside what runs there: other 60.8 GB; 121.7 GB in all, more than "
        "the 116.0 GB it has for engines"
    ) in result.stdout


def test_preflight_tells_sparkcs_containers_from_foreign_gpu_processes(fake: FakeCluster) -> None:
    spec, other = _beside(fake, 0.3)
    node = spec["cluster"]["nodes"][0]["name"]
    container_id = "d" * 64
    _running(fake, other, node, container_id)
    fake.set_gpus(node, ["NVIDIA GB10"], ["4242, python3", "4343, python3"])
    proc = fake.state / "nodes" / node / "root" / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{container_id}.scope\n")
    (proc / "4343").mkdir(parents=True)
    (proc / "4343" / "cgroup").write_text("0::/user.slice/user-1000.slice/session-2.scope\n")
    result = fake.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 1
    assert f"the GPU of {node} is busy: 4343, python3. Stop that program" in result.stdout  # 4242 is other's
    (proc / "4343" / "cgroup").unlink()
    fake.set_gpus(node, ["NVIDIA GB10"], ["4242, python3"])
    assert fake.run("launch-cluster.sh", "--preflight-only").returncode == 0


def test_preflight_names_the_deployment_that_holds_a_port(fake: FakeCluster) -> None:
    spec, other = _beside(fake, 0.3)
    node = spec["cluster"]["nodes"][0]["name"]
    port = spec["engine"]["port"]
    _running(fake, with_changes(other, {"engine.port": port}), node, "e" * 64)
    result = fake.run("launch-cluster.sh", "--preflight-only")
    assert result.returncode == 1
    taken = f"port {port} on {node}, which qwen3-32b listens on, is taken by deployment other (container sparkc-other-"
    assert taken in result.stdout


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def test_status_all_lists_every_deployment_on_the_nodes(fake: FakeCluster) -> None:
    spec, other = _beside(fake, 0.3)
    node = spec["cluster"]["nodes"][0]["name"]
    _running(fake, other, node, "f" * 64)
    stopped = with_changes(other, {"name": "stopped", "engine.port": other["engine"]["port"] + 1})
    _running(fake, stopped, node, "0" * 64)
    meta = fake.state / "nodes" / node / "containers" / f"sparkc-stopped-{node}" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "status": "exited"}))
    server = ThreadingHTTPServer(("127.0.0.1", other["engine"]["port"]), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = fake.run("status.sh", "--all")
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    ip = spec["cluster"]["nodes"][0]["fabric"]["ip"]  # the head's address: this solo node has no ssh name
    assert rows == [
        ["DEPLOYMENT", "STATE", "NODES", "ENDPOINT"],
        ["other", "running", node, f"http://{ip}:{other['engine']['port']}", "healthy"],
        ["stopped", "exited", node, f"http://{ip}:{stopped['engine']['port']}", "not", "answering"],
    ]


def test_the_budget_of_a_kv_cache_and_of_sglang_without_a_fraction(tmp_path: Path) -> None:
    kv = {"engine.gpu_memory_utilization": DELETE, "engine.kv_cache_memory": "20g"}
    result = compile_spec(with_changes(example(f"side-by-side/{BIG}"), kv), str(PAIR / BIG))
    assert result.ok and result.plan
    budget = result.plan.nodes[0].budget
    # vLLM's start check: (72 GB over 2 ranks + 20 GiB + 4 GiB for activations) / 128 GB = 0.49, and its own init
    assert budget is not None and budget.bytes == int(0.49 * 128e9) + 9 * 2**30
    assert budget.how == (
        "gpu_memory_utilization (derived from the weights and kv_cache_memory) 0.49 x 128 GB"
        " + 9.7 GB of vLLM's own init"
    )
    trtllm = {
        **kv,
        "engine.kind": "trtllm",
        "engine.backend": "mpi",
        "container.image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5",
        "model.name": DELETE,
    }
    result = compile_spec(with_changes(example(f"side-by-side/{BIG}"), trtllm), str(PAIR / BIG))
    assert result.ok and result.plan, diagnostics_text(result)
    budget = result.plan.nodes[0].budget
    assert budget is not None and budget.bytes == 36_000_000_000 + 20 * 2**30  # 72 GB over 2 ranks + 20 GiB
    assert budget.how == "weights 36.0 GB per rank + kv_cache_memory 21.5 GB"
    sglang = {
        "engine.kind": "sglang",
        "engine.gpu_memory_utilization": DELETE,
        "engine.port": 30001,
        "container.image": "lmsysorg/sglang:v0.5.23-cu130",
    }
    folder = _pair(tmp_path, small=sglang)
    result = _compile(folder, command="validate")
    assert result.exit_code == 1
    assert "qwen3-8b shares spark-a with llama33-70b, but its memory there cannot be budgeted: SGLang's own" in (
        result.output
    )
