"""setup-fabric.sh on the simulated cluster: --dry-run changes nothing, a run repairs a node's MTU and
another's missing fabric address, addresses two nodes' second netdev (a twin: one from fabric.addresses,
one by NVIDIA's next-/24 rule) and puts the head's new ssh key on the workers, a second run changes
nothing. The nodes have neither netplan nor nmcli, so the live path (`ip`) is what runs; each node gets
a new, empty ~/.ssh (a bind mount in its mount namespace), undone after, where the head's known_hosts then
gets every node's host key as the operator's first, checked ssh to each would record it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.resolve.rules.cluster import roce_name
from simcluster import Node, SimCluster
from tests.specs import dump, example

pytestmark = pytest.mark.cluster

SSH_HOME = Path("/root/.ssh")


@contextmanager
def own_ssh_dirs(cluster: SimCluster, work: Path) -> Iterator[dict[str, Path]]:
    created = not SSH_HOME.exists()
    SSH_HOME.mkdir(mode=0o700, exist_ok=True)  # the mount point; the nodes share the host's files
    dirs = {}
    try:
        with ExitStack() as stack:
            for node in cluster.nodes:
                d = work / f"ssh-{node.name}"
                d.mkdir(mode=0o700)
                cluster.exec(node.name, ["mount", "--bind", str(d), str(SSH_HOME)], check=True)
                stack.callback(cluster.exec, node.name, ["umount", str(SSH_HOME)])
                dirs[node.name] = d
            yield dirs
    finally:
        if created:
            SSH_HOME.rmdir()


def _mtu(cluster: SimCluster, node: str, netdev: str) -> str:
    return cluster.exec(node, ["cat", f"/sys/class/net/{netdev}/mtu"], check=True).stdout.strip()


def _has_address(cluster: SimCluster, node: str, netdev: str, ip: str) -> bool:
    return f"inet {ip}/24 " in cluster.exec(node, ["ip", "-4", "addr", "show", "dev", netdev], check=True).stdout


def _twin(netdev: str) -> str:
    return "enP2" + netdev[2:]  # enp1s0f1np1 -> enP2p1s0f1np1, the port's second PCIe function


@contextmanager
def twins(cluster: SimCluster, *nodes: Node) -> Iterator[None]:
    """Each node's twin netdev (down, MTU 1500, no address), removed after: one end of a veth pair inside the
    node (this kernel has no dummy links), as cheap as a netdev gets."""
    try:
        for node in nodes:
            twin = _twin(node.fabric_netdev)
            cluster.exec(node.name, ["ip", "link", "add", twin, "type", "veth", "peer", "name", "twinpeer"], check=True)
        yield
    finally:
        for node in nodes:
            cluster.exec(node.name, ["ip", "link", "del", _twin(node.fabric_netdev)])


def test_setup_fabric_dry_run_then_repair_then_nothing(sim_cluster: SimCluster, tmp_path: Path) -> None:
    head, two, three = sim_cluster.nodes
    spec = example("llama33-70b-2spark-native")
    spec["cluster"] = {
        "nodes": [
            {"name": n.name, "ssh": n.mgmt_ip, "fabric": {"ip": n.fabric_ip, "netdev": n.fabric_netdev}}
            for n in sim_cluster.nodes
        ]
    }
    # spark2's twin at an address of the spec's; spark3's in hcas, so at NVIDIA's next /24.
    two_twin, three_twin = _twin(two.fabric_netdev), _twin(three.fabric_netdev)
    two_twin_ip = "10.78.5.12"
    three_twin_ip = ipaddress.IPv4Address(three.fabric_ip) + 256
    spec["cluster"]["nodes"][1]["fabric"]["addresses"] = {two_twin: two_twin_ip}
    spec["cluster"]["nodes"][2]["fabric"]["hcas"] = ["rocep1s0f0", "roceP2p1s0f0"]
    for node in spec["cluster"]["nodes"][:2]:  # RDMA on every node (NCCL uses one transport): their own port's
        node["fabric"]["hcas"] = [roce_name(node["fabric"]["netdev"])]
    spec["engine"].update(tensor_parallel=1, pipeline_parallel=3)
    (tmp_path / "spec.yaml").write_text(dump(spec))
    made = CliRunner().invoke(cli, ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "build")])
    assert made.exit_code == 0, made.output
    script = str(tmp_path / "build" / "setup-fabric.sh")
    with own_ssh_dirs(sim_cluster, tmp_path) as ssh_dirs, twins(sim_cluster, two, three):
        known = ssh_dirs[head.name] / "known_hosts"
        known.write_text("".join(f"{n.mgmt_ip} {sim_cluster.host_key(n)}\n" for n in sim_cluster.nodes))
        sim_cluster.exec(two.name, ["ip", "link", "set", "dev", two.fabric_netdev, "mtu", "1500"], check=True)
        sim_cluster.exec(
            three.name, ["ip", "addr", "del", f"{three.fabric_ip}/24", "dev", three.fabric_netdev], check=True
        )
        try:
            dry = sim_cluster.exec(head.name, ["bash", script, "--dry-run"], timeout=120)
            assert dry.returncode == 0, dry.stdout + dry.stderr
            assert f"spark2: would run: ip link set dev {two.fabric_netdev} mtu 9000" in dry.stdout
            assert f"spark3: would run: ip addr add {three.fabric_ip}/24 dev {three.fabric_netdev}" in dry.stdout
            assert "would create an ed25519 key" in dry.stdout and "dry run: nothing was changed" in dry.stdout
            assert "neither netplan nor nmcli" in dry.stdout
            assert f"== spark2: {two_twin} {two_twin_ip}/24, MTU 9000" in dry.stdout
            assert f"== spark3: {three_twin} {three_twin_ip}/24, MTU 9000" in dry.stdout
            assert f"spark2: would run: ip link set dev {two_twin} mtu 9000" in dry.stdout
            assert f"spark2: would run: ip addr add {two_twin_ip}/24 dev {two_twin}" in dry.stdout
            assert f"spark3: would run: ip addr add {three_twin_ip}/24 dev {three_twin}" in dry.stdout
            assert _mtu(sim_cluster, two.name, two_twin) == "1500"
            assert not _has_address(sim_cluster, three.name, three_twin, str(three_twin_ip))
            assert _mtu(sim_cluster, two.name, two.fabric_netdev) == "1500"
            assert not _has_address(sim_cluster, three.name, three.fabric_netdev, three.fabric_ip)
            assert [p.name for p in ssh_dirs[head.name].iterdir()] == ["known_hosts"]  # no key made

            run = sim_cluster.exec(head.name, ["bash", script], timeout=120)
            assert run.returncode == 0, run.stdout + run.stderr
            assert _mtu(sim_cluster, two.name, two.fabric_netdev) == "9000"
            assert _has_address(sim_cluster, three.name, three.fabric_netdev, three.fabric_ip)
            public = (ssh_dirs[head.name] / "id_ed25519.pub").read_text().strip()
            for worker in (two, three):
                assert (ssh_dirs[worker.name] / "authorized_keys").read_text().splitlines() == [public]
            assert "spark1: enp1s0f1np1 already has" in run.stdout  # the head needed nothing
            for node, twin, twin_ip in ((two, two_twin, two_twin_ip), (three, three_twin, str(three_twin_ip))):
                assert _mtu(sim_cluster, node.name, twin) == "9000"
                assert _has_address(sim_cluster, node.name, twin, twin_ip)
            assert f"spark3: run: ip addr add {three_twin_ip}/24 dev {three_twin}" in run.stdout

            again = sim_cluster.exec(head.name, ["bash", script], timeout=120)
            assert again.returncode == 0, again.stdout + again.stderr
            assert "run:" not in again.stdout and again.stdout.count("nothing to change") == 5
            assert again.stdout.count("the head key is already authorized") == 2
            assert (ssh_dirs[two.name] / "authorized_keys").read_text().splitlines() == [public]
        finally:
            sim_cluster.exec(two.name, ["ip", "link", "set", "dev", two.fabric_netdev, "mtu", "9000"])
            if not _has_address(sim_cluster, three.name, three.fabric_netdev, three.fabric_ip):
                sim_cluster.exec(three.name, ["ip", "addr", "add", f"{three.fabric_ip}/24", "dev", three.fabric_netdev])


NETPLAN_BEFORE = """network:
  version: 2
  ethernets:
    {netdev}:
      addresses: [192.168.77.2/24]
      mtu: 9000
    {other}:   # the card's other port, which setup-fabric does not address here
      link-local: [ipv4]
"""


def test_setup_fabric_replaces_what_another_netplan_file_says_about_the_netdev(
    sim_cluster: SimCluster, tmp_path: Path
) -> None:
    """Netplan concatenates address lists across files: a netdev NVIDIA's 40-cx7.yaml (or a hand-made file)
    addresses would keep that address beside the fabric's. The node script takes the netdev out of the other
    file (keeping the rest of it, and a copy as it was), writes its own, applies once, and drops the old
    address live. Run in spark2 directly, with netplan's folders under a test root and a netplan that logs."""
    two = sim_cluster.nodes[1]
    netdev, address = two.fabric_netdev, f"{two.fabric_ip}/24"
    other = "enp1s0f0np0" if netdev != "enp1s0f0np0" else "enp1s0f1np1"
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "etc" / "netplan").mkdir(parents=True)
    (root / "sys").symlink_to("/sys")
    bin_dir.mkdir()
    (bin_dir / "netplan").write_text(f'#!/bin/sh\necho "netplan $*" >>{tmp_path}/netplan.log\n')
    (bin_dir / "netplan").chmod(0o755)
    cx7 = root / "etc" / "netplan" / "40-cx7.yaml"
    before = NETPLAN_BEFORE.format(netdev=netdev, other=other)
    cx7.write_text(before)
    script = (Path(__file__).parents[2] / "templates" / "setup" / "fabric-node.sh").read_text()
    env = {
        "PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "SPARKC_SETUP_ROOT": str(root),
    }

    def run(dry: str) -> str:
        done = sim_cluster.exec(two.name, ["sh", "-s", "--", "9000", dry, netdev, address], input=script, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def addresses() -> str:
        return sim_cluster.exec(two.name, ["ip", "-4", "-o", "addr", "show", "dev", netdev], check=True).stdout

    sim_cluster.exec(two.name, ["ip", "addr", "add", "192.168.77.2/24", "dev", netdev], check=True)
    try:
        dry = run("1")
        assert (
            f"would take {netdev} out of {cx7}" in dry and f"would run: ip addr del 192.168.77.2/24 dev {netdev}" in dry
        )
        assert cx7.read_text() == before and not (tmp_path / "netplan.log").exists()

        out = run("0")
        assert f"took {netdev} out of {cx7}" in out, out
        kept = cx7.read_text()
        assert netdev not in kept and f"    {other}:" in kept and "link-local: [ipv4]" in kept, kept
        assert (root / "etc" / "netplan" / "40-cx7.yaml.sparkc-saved").read_text() == before
        ours = (root / "etc" / "netplan" / f"60-sparkc-fabric-{netdev}.yaml").read_text()
        assert f"addresses: [{address}]" in ours
        assert (tmp_path / "netplan.log").read_text() == "netplan apply\n"
        assert "192.168.77.2" not in addresses() and f"inet {address}" in addresses()

        again = run("0")
        assert "took" not in again and "run:" not in again and "nothing to change" in again, again
        assert (tmp_path / "netplan.log").read_text() == "netplan apply\n"  # nothing to apply the second time
    finally:
        sim_cluster.exec(two.name, ["ip", "addr", "del", "192.168.77.2/24", "dev", netdev])
        if f"inet {address}" not in addresses():
            sim_cluster.exec(two.name, ["ip", "addr", "add", address, "dev", netdev])
