"""One Spark with nothing cabled: a single node needs no fabric section. It talks to itself over loopback, and
the launcher checks no link or RDMA device there; several nodes still need each its fabric."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.pipeline import compile_text
from tests.fakes.cluster import FakeCluster
from tests.specs import DELETE, compile_spec, diagnostics_text, dump, example, node_env, with_changes

SOLO = with_changes(example("solo-qwen3-32b"), {"cluster.nodes.0.fabric": DELETE})


def test_one_node_without_a_fabric_compiles_onto_loopback() -> None:
    result = compile_spec(SOLO)
    assert result.ok and result.plan, diagnostics_text(result)
    env = node_env(result.plan, "spark-a")
    assert env["MASTER_ADDR"] == env["VLLM_HOST_IP"] == "127.0.0.1"
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "lo" and env["NCCL_IB_DISABLE"] == "1"
    # The preflight's map of fabric netdevs holds none for it: nothing to check.
    assert "declare -rA SPARKC_NETDEV=(\n  [spark-a]=''\n)" in result.files["deployment.sh"]


def test_several_nodes_each_need_their_fabric() -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"cluster.nodes.1.fabric": DELETE})
    text = dump(spec)
    result = compile_text(text, "spec.yaml", render_files=False)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert [d.path for d in errors] == [("cluster", "nodes", 1)], errors
    assert text.splitlines()[errors[0].line - 1].strip() == "- name: spark-b"
    assert errors[0].message.startswith("missing required key 'fabric': several nodes talk over the fabric")


def test_preflight_checks_no_link_or_rdma_device_on_one_node_without_a_fabric(fake: FakeCluster) -> None:
    fake.compile(fake.adapt(SOLO))
    launch = fake.run("launch-cluster.sh")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "spark-a: docker " in launch.stdout and "fabric none (one node), RDMA none" in launch.stdout
    assert not [call for call in fake.calls() if call.startswith("ip[")]  # no interface looked up


def test_setup_fabric_has_nothing_to_set_up_for_one_node_without_a_fabric(tmp_path: Path) -> None:
    spec = tmp_path / "solo.yaml"
    spec.write_text(dump(SOLO))
    made = CliRunner().invoke(cli, ["setup-fabric", str(spec), "-o", str(tmp_path / "out")])
    assert made.exit_code == 0, made.output
    script = (tmp_path / "out" / "setup-fabric.sh").read_text()
    assert "127.0.0.1" not in script and " lo " not in script
