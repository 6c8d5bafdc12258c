"""sparkc discover over real OpenSSH against the simulated nodes.

The nodes have no ConnectX-7, so each gets the sysfs a Spark shows under /sys/class/infiniband, made
in that node's own mount namespace: a tmpfs over /sys/class holding the node's real classes (bind
mounts, so /sys/class/net is still the node's own netdevs) plus an `infiniband` tree whose device
links to the node's fabric netdev and whose GID table holds its real fabric address. MTU, link state
and addresses are the node's real ones (`ip` in its network namespace). Everything is undone after.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from simcluster import SimCluster
from tests.product import SPARKC
from tests.specs import ROOT, dump, example

pytestmark = pytest.mark.cluster

TWIN = "enP2p1s0f1np1"  # spark2's second port function, added as a veth for the test


def _gid(ip: str) -> str:
    packed = ipaddress.IPv4Address(ip).packed
    return "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}".format(*packed)


def _hca(netdev: str) -> str:
    return "roce" + netdev.removeprefix("en").rsplit("np", 1)[0]  # enp1s0f1np1 -> rocep1s0f1


FAKE_CLASS = r"""
set -eu
orig=$1; shift
mkdir -p "$orig"
mount --bind /sys/class "$orig"
mount -t tmpfs sparkc-fake-sysfs /sys/class
for d in "$orig"/*; do mkdir "/sys/class/${d##*/}"; mount --bind "$d" "/sys/class/${d##*/}"; done
while [ $# -gt 0 ]; do
  hca=$1 netdev=$2 gid=$3; shift 3
  base=/sys/class/infiniband/$hca
  mkdir -p "$base/device/net/$netdev" "$base/ports/1/gids" "$base/ports/1/gid_attrs/types"
  i=0
  for g in fe80:0000:0000:0000:4ebb:47ff:fe00:0001 fe80:0000:0000:0000:4ebb:47ff:fe00:0001 "$gid" "$gid"; do
    echo "$g" >"$base/ports/1/gids/$i"; i=$((i + 1))
  done
  echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$base/ports/1/gids/4"
  printf 'IB/RoCE v1\n' >"$base/ports/1/gid_attrs/types/0"; printf 'RoCE v2\n' >"$base/ports/1/gid_attrs/types/1"
  printf 'IB/RoCE v1\n' >"$base/ports/1/gid_attrs/types/2"; printf 'RoCE v2\n' >"$base/ports/1/gid_attrs/types/3"
done
"""


@contextmanager
def fake_infiniband(cluster: SimCluster, node: str, devices: list[tuple[str, str, str]], work: Path) -> Iterator[None]:
    orig = work / f"class-{node}"
    args = [word for device in devices for word in device]
    cluster.exec(node, ["sh", "-c", FAKE_CLASS, "fake", str(orig), *args], check=True)
    try:
        yield
    finally:
        cluster.exec(node, ["umount", "-R", "/sys/class"])
        cluster.exec(node, ["umount", str(orig)])


@contextmanager
def twin_on_the_fabric_subnet(cluster: SimCluster, node: str, address: str) -> Iterator[None]:
    """A second CX-7 port function, up, MTU 1500, on the same subnet as the fabric netdev: two warnings."""
    setup = f"ip link add {TWIN} mtu 1500 type veth peer name sparkc-peer && ip link set sparkc-peer up && "
    setup += f"ip link set {TWIN} up && ip addr add {address}/24 dev {TWIN}"
    cluster.sh(node, setup, check=True)
    try:
        yield
    finally:
        cluster.sh(node, f"ip link del {TWIN}")


def test_discover_reads_every_node_and_its_section_compiles(sim_cluster: SimCluster, tmp_path: Path) -> None:
    nodes = sim_cluster.nodes
    twin_ip = "10.78.0.112"
    with ExitStack() as stack:
        for n in nodes:
            devices = [(_hca(n.fabric_netdev), n.fabric_netdev, _gid(n.fabric_ip))]
            if n.name == "spark2":
                devices.append((_hca(TWIN), TWIN, _gid(twin_ip)))
                stack.enter_context(twin_on_the_fabric_subnet(sim_cluster, n.name, twin_ip))
            stack.enter_context(fake_infiniband(sim_cluster, n.name, devices, tmp_path))
        unreachable = "10.77.0.99"  # no node has it
        argv = [*SPARKC, "discover", "--connect-timeout", "5"]
        done = sim_cluster.exec(
            nodes[0].name, [*argv, *(n.mgmt_ip for n in nodes), unreachable], cwd=str(ROOT), timeout=120
        )
        as_json = sim_cluster.exec(nodes[0].name, [*argv, "--format", "json", nodes[2].mgmt_ip], cwd=str(ROOT))
    assert done.returncode == 1, done.stderr
    assert f"error: {unreachable} unreachable: ssh: connect to host {unreachable} port 22" in done.stderr
    assert f"warning: spark2: {TWIN} has MTU 1500" in done.stderr
    assert f"warning: spark2: {TWIN} and enp1s0f1np1 are both on 10.78.0.0/24" in done.stderr
    assert "GPU count unknown" not in done.stderr  # each node's nvidia-smi answers
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["cluster"]["nodes"][0]["gpus"] == 1  # from the node's nvidia-smi
    assert json.loads(as_json.stdout)["cluster"]["nodes"][0]["fabric"] == {
        "ip": nodes[2].fabric_ip,
        "netdev": "enp1s0f0np0",
        "hcas": ["rocep1s0f0"],
    }
    # The section as printed, saved as a cluster file: a spec using it compiles onto the real addresses.
    (tmp_path / "cluster.yaml").write_text(done.stdout)
    spec = example("llama33-70b-2spark-native")
    spec["cluster"] = {"file": "cluster.yaml"}
    spec["container"].pop("secrets", None)
    spec["engine"].update(tensor_parallel=1, pipeline_parallel=3)  # three one-GPU nodes
    (tmp_path / "spec.yaml").write_text(dump(spec))
    result = compile_text((tmp_path / "spec.yaml").read_text(), str(tmp_path / "spec.yaml"))
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.plan is not None
    planned = {p.name: (p.fabric_ip, p.netdev, p.hcas) for p in result.plan.nodes}
    assert planned == {
        "spark1": (nodes[0].fabric_ip, "enp1s0f1np1", ("rocep1s0f1",)),
        "spark2": (nodes[1].fabric_ip, "enp1s0f1np1", ("roceP2p1s0f1", "rocep1s0f1")),  # both twins (up)
        "spark3": (nodes[2].fabric_ip, "enp1s0f0np0", ("rocep1s0f0",)),
    }
