"""Control and data planes: a node's control netdev and IP carry the rendezvous, Gloo, TensorPipe and Ray;
its data netdevs carry NCCL's sockets and Open MPI; UCX gets the RDMA devices. Without them, one netdev
carries everything, exactly as before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compiler.output.explain_view import explain_text
from tests.specs import (
    compile_into,
    compile_spec,
    container_command,
    diagnostics_text,
    example,
    flag_value,
    node_env,
    with_changes,
)

NATIVE = example("llama33-70b-2spark-native")
SPLIT = {
    "cluster.nodes.0.control": {"netdev": "enP7s7", "ip": "10.0.0.10"},
    "cluster.nodes.1.control": {"netdev": "enP7s7", "ip": "10.0.0.11"},
    "cluster.nodes.1.fabric.netdevs": ["enp1s0f0np0", "enP2p1s0f0np0"],
}


def test_control_plane_carries_rendezvous_gloo_and_host_ip_data_plane_carries_nccl() -> None:
    result = compile_spec(with_changes(NATIVE, SPLIT))
    assert result.ok, diagnostics_text(result)
    plan = result.plan
    assert plan is not None
    worker = node_env(plan, "spark-b")
    assert worker["GLOO_SOCKET_IFNAME"] == worker["TP_SOCKET_IFNAME"] == "enP7s7"
    assert worker["NCCL_SOCKET_IFNAME"] == worker["OMPI_MCA_btl_tcp_if_include"] == "enp1s0f0np0,enP2p1s0f0np0"
    assert worker["UCX_NET_DEVICES"] == "rocep1s0f0:1,roceP2p1s0f0:1"
    assert worker["MASTER_ADDR"] == "10.0.0.10" and worker["VLLM_HOST_IP"] == "10.0.0.11"
    assert flag_value(container_command(plan, "spark-b"), "--master-addr") == "10.0.0.10"
    head = node_env(plan, "spark-a")
    assert head["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"  # no netdevs given: the fabric netdev alone
    assert head["VLLM_HOST_IP"] == "10.0.0.10"
    text = explain_text(plan)
    assert "control plane 10.0.0.11 on enP7s7; data plane enp1s0f0np0, enP2p1s0f0np0" in text
    assert "this node's control netdev (cluster.nodes[].control.netdev)" in text
    assert "this node's data netdevs (cluster.nodes[].fabric.netdevs)" in text


def test_ray_uses_the_control_ips() -> None:
    spec = with_changes(example("seed-qwen35-122b-2spark-ray"), {k: v for k, v in SPLIT.items() if "control" in k})
    result = compile_spec(spec)
    assert result.ok, diagnostics_text(result)
    plan = result.plan
    assert plan is not None
    assert plan.ray_expected_ips == ("10.0.0.10", "10.0.0.11")
    assert "--node-ip-address=10.0.0.11" in container_command(plan, "spark-b")
    assert node_env(plan, "spark-b")["RAY_NODE_IP_ADDRESS"] == "10.0.0.11"
    assert "--address=10.0.0.10:6379" in container_command(plan, "spark-b")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"cluster.nodes.0.control": {"netdev": "enP7s7", "ip": "10.0.0.10"}},
            "has no 'control' while spark-a has one",
        ),
        ({**SPLIT, "cluster.nodes.1.control.ip": "spark-b.lan"}, "'spark-b.lan' is not an IP address"),
        ({**SPLIT, "cluster.nodes.1.control.ip": "10.0.0.10"}, "already the control IP of spark-a"),
        ({**SPLIT, "cluster.nodes.1.fabric.netdevs": []}, "must list at least one"),
        ({**SPLIT, "cluster.nodes.1.fabric.netdevs": ["a", "a"]}, "non-unique"),
        ({**SPLIT, "cluster.nodes.1.fabric.netdevs": ["eth0;reboot"]}, "must be a network interface name"),
        ({**SPLIT, "cluster.nodes.1.control.netdev": "^lo"}, "must be a network interface name"),
        ({**SPLIT, "cluster.nodes.1.control": {"netdev": "enP7s7"}}, "missing required key 'ip'"),
    ],
)
def test_planes_are_validated(changes: dict[str, object], message: str) -> None:
    result = compile_spec(with_changes(NATIVE, changes))
    assert not result.ok and message in diagnostics_text(result), diagnostics_text(result)


def test_a_spec_without_planes_renders_no_plane_steps(tmp_path: Path) -> None:
    assert compile_into(NATIVE, tmp_path / "out").ok
    launch = (tmp_path / "out" / "deployment.sh").read_text()
    assert "declare -rA SPARKC_CONTROL_NETDEV" not in launch and "check_planes()" not in launch
    assert '"planes"' not in (tmp_path / "out" / "manifest.json").read_text()


def test_dry_run_shows_the_plane_checks(tmp_path: Path) -> None:
    result = compile_into(with_changes(NATIVE, SPLIT), tmp_path / "out")
    assert result.ok
    run = subprocess.run(
        ["bash", str(tmp_path / "out" / "launch-cluster.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HF_TOKEN": "x"},
    )
    # The plane checks ride in each node's one preflight round trip, with that node's interfaces.
    checks = "<preflight: host docker model weights draft mounts fabric hcas gpus memory sparkc planes>"
    assert checks in run.stdout, run.stdout + run.stderr
    assert "control=enP7s7 data=enp1s0f0np0\\ enP2p1s0f0np0" in run.stdout
