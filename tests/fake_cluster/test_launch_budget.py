"""What real deployments need by default, and one time budget for launcher and engine."""

from __future__ import annotations

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import compile_spec, docker_run_words, example, flag_value, flag_values, node_env, with_changes


def warnings(name: str, changes: dict[str, object]) -> list[str]:
    result = compile_spec(with_changes(example(name), changes), render_files=False)
    return [d.message for d in result.diagnostics if d.severity == "warning"]


def test_timeout_at_launch_moves_the_engines_own_timeout(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native")
    launch = fake.run("launch-cluster.sh", "--timeout", "500")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    for node in ("spark-a", "spark-b"):
        container = fake.container(node, f"sparkc-llama33-70b-{node}")
        assert container is not None and container["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "440"


def test_timeout_at_launch_moves_sglangs_dist_timeout(fake: FakeCluster) -> None:
    fake.prepare("sglang-qwen3-30b-2spark")
    launch = fake.run("launch-cluster.sh", "--timeout", "300")
    assert launch.returncode == 0, launch.stdout + launch.stderr
    container = fake.container("spark-b", "sparkc-qwen3-30b-sglang-spark-b")
    assert container is not None and flag_value(container["words"], "--dist-timeout") == "240"


def test_defaults_every_launcher_sets() -> None:
    plan = compile_spec(example("seed-qwen35-122b-2spark-ray")).plan
    assert plan is not None
    env = node_env(plan, "spark-b")
    assert env["NCCL_IGNORE_CPU_AFFINITY"] == "1" and env["RAY_num_prestart_python_workers"] == "0"
    assert "nofile=1048576" in flag_values(docker_run_words(plan.nodes[1]), "--ulimit")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"container.env": {"NCCL_DEBUG": "WARN"}}, "hides the lines the fabric check reads"),
        ({"cluster.nodes.1.env": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}}, "differs from its fabric netdev"),
        ({"cluster.topology": "mesh", "engine.env": {"NCCL_NET_PLUGIN": "ib"}}, "replaces the topology's"),
        ({"container.image": "nvcr.io/nvidia/vllm"}, "names no fixed release"),
        ({"container.image": "nvcr.io/nvidia/vllm:latest"}, "names no fixed release"),
        ({"engine.gpu_memory_utilization": 0.95}, "leaves too little to the OS"),
    ],
)
def test_settings_that_quietly_undo_sparkcs_are_warned_about(changes: dict[str, object], expected: str) -> None:
    assert any(expected in w for w in warnings("llama33-70b-2spark-native", changes))


def test_a_pinned_image_is_not_warned_about() -> None:
    pinned = {"container.image": "nvcr.io/nvidia/vllm@sha256:" + "a" * 64}
    assert not any("fixed release" in w for w in warnings("llama33-70b-2spark-native", pinned))


def test_the_launch_records_the_image_each_node_ran(fake: FakeCluster) -> None:
    fake.prepare("llama33-70b-2spark-native")
    assert fake.run("launch-cluster.sh").returncode == 0
    record = (fake.build / "last-launch.txt").read_text()
    assert "image_id.spark-a=sha256:" in record and "image_id.spark-b=sha256:" in record
    assert "\nstate=ready\n" in record


def test_an_unknown_image_with_an_explicit_bypass_is_not_warned_about() -> None:
    image = {"container.image": "ghcr.io/me/vllm:1"}
    assert any("no profile for image" in w for w in warnings("llama33-70b-2spark-native", image))
    bypass = {**image, "container.entrypoint": "bypass"}
    assert not any("no profile for image" in w for w in warnings("llama33-70b-2spark-native", bypass))
