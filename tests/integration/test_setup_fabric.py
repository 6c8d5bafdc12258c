"""sparkc setup-fabric: the script for each example is shellcheck-clean (checked when written) and addresses
every fabric netdev of every node (both twins, both cables of a mesh or ring); a netdev whose address the
spec does not say, and NVIDIA's next-/24 rule cannot give, is refused at its place, as is a spec with errors.
On nodes: tests/cluster/test_setup_fabric_on_cluster.py."""

from __future__ import annotations

import ipaddress
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.resolve.rules.cluster import roce_name
from tests.specs import DELETE, EXAMPLES, dump, example, with_changes


def _script(tmp_path: Path, spec: dict[str, Any] | Path, *options: str) -> tuple[int, str, str]:
    """(exit status, output, script) of sparkc setup-fabric on `spec` (a spec, or a spec file)."""
    tmp_path.mkdir(exist_ok=True)
    if not isinstance(spec, Path):
        (tmp_path / "spec.yaml").write_text(dump(spec))
        spec = tmp_path / "spec.yaml"
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["setup-fabric", str(spec), "-o", str(out), *options])
    script = (out / "setup-fabric.sh").read_text() if (out / "setup-fabric.sh").exists() else ""
    return result.exit_code, result.output, script


def _links(script: str) -> dict[str, list[tuple[str, str]]]:
    """The script's LINKS: each node's (netdev, address/prefix) pairs, as bash reads them."""
    body = re.search(r"^declare -rA LINKS=\(\n(.*?)^\)$", script, re.M | re.S)
    assert body, script
    links = {}
    for node, words in re.findall(r"^  \[([a-z0-9-]+)\]='?([^'\n]*)'?$", body.group(1), re.M):
        pairs = words.split()
        links[node] = list(zip(pairs[::2], pairs[1::2], strict=True))
    return links


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_every_example_gets_a_script_for_every_fabric_netdev(tmp_path: Path, name: str) -> None:
    """fabric.netdev at fabric.ip, every fabric.addresses entry, and every twin whose RDMA device hcas lists
    (preflight wants its RoCE v2 IPv4 GID, which needs an address), on the fabric's prefix."""
    spec = example(name)
    code, output, script = _script(tmp_path, EXAMPLES / f"{name}.yaml")
    assert code == 0, output
    cluster = spec["cluster"]
    prefix = cluster.get("link_prefix_length", 24) if cluster.get("topology") in ("mesh", "ring") else 24
    links = _links(script)
    for node in cluster["nodes"]:
        fabric = node["fabric"]
        got = dict(links[node["name"]])
        assert got[fabric["netdev"]] == f"{fabric['ip']}/{prefix}" and links[node["name"]][0][0] == fabric["netdev"]
        for netdev, ip in fabric.get("addresses", {}).items():
            assert got[netdev] == f"{ip}/{prefix}"
        for netdev in fabric.get("netdevs", []):
            assert netdev in got
        # Every RDMA device hcas lists has its netdev addressed (both twins), and no other twin is.
        listed = {h.lstrip("=").split(":")[0] for h in fabric.get("hcas", [])}
        assert {h for h in listed if h.startswith("roce")} <= {roce_name(n) for n in got}
        assert all(roce_name(n) in listed for n in got if n.startswith("enP")), got
        assert len({ipaddress.IPv4Interface(a).network for a in got.values()}) == len(got)  # a subnet each
    usage = subprocess.run(
        ["bash", str(tmp_path / "out" / "setup-fabric.sh"), "--bogus"], capture_output=True, text=True
    )
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_a_twin_in_hcas_without_an_address_gets_nvidias_next_subnet(tmp_path: Path) -> None:
    code, output, script = _script(tmp_path, example("llama33-70b-2spark-native"))
    assert code == 0, output
    assert _links(script) == {
        "spark-a": [("enp1s0f1np1", "192.168.100.10/24"), ("enP2p1s0f1np1", "192.168.101.10/24")],
        "spark-b": [("enp1s0f0np0", "192.168.100.11/24"), ("enP2p1s0f0np0", "192.168.101.11/24")],
    }
    assert "#   spark-a: enP2p1s0f1np1 192.168.101.10/24 (the next /24 of 192.168.100.10, NVIDIA's twin)" in script
    # A twin hcas does not list needs no address.
    single = with_changes(example("llama33-70b-2spark-native"), {"cluster.nodes.0.fabric.hcas": ["rocep1s0f1"]})
    assert _links(_script(tmp_path / "single", single)[2])["spark-a"] == [("enp1s0f1np1", "192.168.100.10/24")]


def _refusals(output: str) -> list[str]:
    lines = output.splitlines()
    return [line for line in lines if re.match(r".*spec\.yaml:\d+:\d+: ", line) and ": warning: " not in line]


def test_a_twin_that_nvidias_rule_cannot_address_is_refused_at_its_node(tmp_path: Path) -> None:
    # spark-b's control address sits on the /24 NVIDIA's rule would give its twin.
    taken = with_changes(
        example("qwen3-32b-2spark-control-data"),
        {"cluster.nodes.1.fabric.addresses": DELETE, "cluster.nodes.1.control.ip": "192.168.101.200"},
    )
    code, output, script = _script(tmp_path, taken)
    assert code == 1 and not script
    [refusal] = _refusals(output)
    assert re.search(
        r"spec\.yaml:\d+:\d+: cluster\.nodes\[spark-b\]\.fabric: spark-b: enP2p1s0f1np1 \(in fabric\.netdevs\) has no "
        r"address \(NVIDIA's rule, the same host part on the next /24, gives no address whose subnet is free here\); "
        r"write fabric\.addresses: \{enP2p1s0f1np1: IP\}",
        refusal,
    ), refusal
    # Another prefix: the rule is NVIDIA's /24; both nodes refused in one run.
    code, output, _ = _script(tmp_path / "p16", example("llama33-70b-2spark-native"), "--prefix-length", "16")
    refusals = _refusals(output)
    assert code == 1 and len(refusals) == 2, output
    assert "spark-a: enP2p1s0f1np1 (RDMA device roceP2p1s0f1 in hcas) has no address (NVIDIA's next-/24 rule" in output


def test_prefix_and_ssh_settings_reach_the_script(tmp_path: Path) -> None:
    spec = with_changes(
        example("llama33-70b-2spark-native"),
        {
            "cluster.ssh.port": 2222,
            "cluster.ssh.options": ["Compression=yes"],
            "cluster.nodes.0.fabric.addresses": {"enP2p1s0f1np1": "192.169.0.10"},
            "cluster.nodes.1.fabric.addresses": {"enP2p1s0f0np0": "192.169.0.11"},
        },
    )
    code, output, script = _script(tmp_path, spec, "--prefix-length", "16")
    assert code == 0, output
    assert _links(script)["spark-b"] == [("enp1s0f0np0", "192.168.100.11/16"), ("enP2p1s0f0np0", "192.169.0.11/16")]
    assert "  2222\n" in script and "  Compression=yes\n" in script
    assert "readonly HEAD_KEY=/home/aurora/.ssh/id_ed25519" in script
    # Its own ssh may ask (a host key to confirm, a password); its last check is the launcher's, BatchMode.
    own = re.search(r"^readonly SSH_OPTS=\((.*?)^\)", script, re.M | re.S)
    launch = re.search(r"^readonly LAUNCH_SSH_OPTS=\((.*?)^\)", script, re.M | re.S)
    assert own and "BatchMode" not in own.group(1) and launch and "BatchMode=yes" in launch.group(1)
    # Both twins on one /16: refused, naming the netdev.
    same = with_changes(spec, {"cluster.nodes.1.fabric.addresses": {"enP2p1s0f0np0": "192.168.200.11"}})
    code, output, _ = _script(tmp_path / "same", same, "--prefix-length", "16")
    assert code == 1 and "spark-b: enP2p1s0f0np0 and enp1s0f0np0 would both be on 192.168.0.0/16" in output


@pytest.mark.parametrize("name", ["qwen3-32b-3spark-mesh", "llama33-70b-4spark-ring"])
def test_mesh_and_ring_take_the_cables_prefix_and_refuse_what_the_spec_does_not_say(tmp_path: Path, name: str) -> None:
    spec = example(name)
    prefix = spec["cluster"].get("link_prefix_length", 24)
    code, output, script = _script(tmp_path, spec)
    assert code == 0 and f"(prefix /{prefix})" in script, output
    assert _script(tmp_path / "same", spec, "--prefix-length", str(prefix))[0] == 0
    other = 16 if prefix != 16 else 24
    code, output, _ = _script(tmp_path / "other", spec, "--prefix-length", str(other))
    assert code == 1 and f"--prefix-length {other} differs from cluster.link_prefix_length {prefix}" in output
    # Without fabric.addresses sparkc cannot choose: every node's other port and twins, refused in one run.
    bare = with_changes(
        spec, {f"cluster.nodes.{i}.fabric.addresses": DELETE for i in range(len(spec["cluster"]["nodes"]))}
    )
    code, output, script = _script(tmp_path / "bare", bare)
    refusals = _refusals(output)
    assert code == 1 and not script and len(refusals) == 3 * len(spec["cluster"]["nodes"]), output
    assert re.search(
        r"spark-b: enp1s0f1np1 \(in fabric.netdevs\) has no address \(in a (mesh|ring) sparkc cannot choose it: "
        r"each cable's two ends share a subnet of their own\); write fabric.addresses: \{enp1s0f1np1: IP\}",
        output,
    )
    assert "spark-b: enP2p1s0f0np0 (RDMA device roceP2p1s0f0 in hcas) has no address (in a" in output


def test_a_spec_with_errors_writes_nothing(tmp_path: Path) -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"cluster.nodes.1.fabric.ip": "not-an-ip"})
    (tmp_path / "spec.yaml").write_text(dump(spec))
    result = CliRunner().invoke(cli, ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "not an IP address" in result.output and not (tmp_path / "out").exists()
