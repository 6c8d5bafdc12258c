"""Three and four Sparks without a switch, on the simulated cluster: each CX-7 cable a veth pair that
reaches only its neighbour, each on its own subnet, plus the management bridge as the 10 GbE control
plane. A mesh and a ring launch become ready with NCCL's bootstrap on the control plane; bootstrap on a
cable fails as NCCL does; distribute.sh reaches every node, neighbour or not, and on a head that knows no
host key, setup-fabric then distribute.sh work once the operator has recorded the nodes' keys by name.

One cluster at a time (mesh first, then ring): the module's own, not the session's three-node switch."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster import ClusterUnavailable, SimCluster, preflight
from simcluster.cluster import PORT0, PORT1
from simcluster.fixtures import CLUSTER_NAME, unavailable
from simcluster.images import VLLM_IMAGE
from simcluster.net import MGMT_IF
from tests.cluster.deployment import Deployment, sim_spec
from tests.cluster.test_host_keys_on_cluster import MODEL as HOST_KEY_MODEL
from tests.cluster.test_host_keys_on_cluster import setup_then_distribute

pytestmark = pytest.mark.cluster

PREFIX = {"mesh": 30, "ring": 24}
NODES = {"mesh": 3, "ring": 4}
LAYOUT = {"mesh": (3, 1), "ring": (2, 2)}
EXAMPLE = {"mesh": "qwen3-32b-3spark-mesh.yaml", "ring": "llama33-70b-4spark-ring.yaml"}


class Clusters:
    """The module's clusters, one up at a time: asking for another topology takes the last one down."""

    def __init__(self) -> None:
        self.current: SimCluster | None = None

    def get(self, topology: str) -> SimCluster:
        if self.current is not None and self.current.topology == topology:
            return self.current
        self.close()
        cluster = SimCluster(
            NODES[topology],
            name=f"{CLUSTER_NAME}-{topology}"[:24],
            topology=topology,
            link_prefix_len=PREFIX[topology],
        )
        try:
            cluster.up(images=(VLLM_IMAGE,))
        except ClusterUnavailable as exc:
            unavailable(str(exc))
        cluster.record_host_keys(cluster.head)  # as the session's cluster: management IPs known on the head
        self.current = cluster
        return cluster

    def close(self) -> None:
        if self.current is not None:
            self.current.teardown()
            self.current = None


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    problems = preflight()
    if problems:
        unavailable("; ".join(problems))
    made = Clusters()
    yield made
    made.close()


def deployment(
    cluster: SimCluster,
    name: str,
    model_dir: Path,
    build: Path,
    node_env: dict[str, str] | None = None,
    model_path: str | None = None,
    order: tuple[int, ...] | None = None,
    by_name: bool = False,
    both_ports: bool = False,
) -> Deployment:
    """The topology's example on the cluster: the 10 GbE is the management bridge (mgmt0), the cables
    are each node's two ports. `by_name`: ssh by host name, and both ports' addresses in the spec (what
    setup-fabric needs). `both_ports`: both ports' addresses, ssh by address."""
    nodes = [
        {
            "name": n.name,
            "ssh": n.name if by_name else n.mgmt_ip,
            "control": {"netdev": MGMT_IF, "ip": n.mgmt_ip},
            "fabric": {"ip": n.fabric_ip, "netdev": PORT0, "netdevs": [PORT0, PORT1], "transport": "sockets"},
            **({"env": node_env} if node_env else {}),
        }
        for n in cluster.nodes
    ]
    if by_name or both_ports:
        for node, n in zip(nodes, cluster.nodes, strict=True):
            node["fabric"]["addresses"] = {PORT1: cluster.ports(n)[PORT1]}  # type: ignore[index]
    if order is not None:  # cluster.nodes in another order than the cabling's
        nodes = [nodes[i] for i in order]
    changes: dict[str, Any] = {
        "container.image": VLLM_IMAGE,
        # The tiny model has 6 heads: TP=3 across the mesh, TP=2 x PP=2 round the ring.
        "engine.tensor_parallel": LAYOUT[cluster.topology][0],
        "engine.pipeline_parallel": LAYOUT[cluster.topology][1],
        "model.architecture": {"attention_heads": 6, "kv_heads": 6},
        "cluster.nodes": nodes,
        "cluster.link_prefix_length": cluster.link_prefix_len,
        **({"model.path": model_path} if model_path else {}),
    }
    spec = sim_spec(cluster, EXAMPLE[cluster.topology], name, len(cluster.nodes), model_dir, changes)
    return Deployment(cluster, spec, build)


def marker(d: Deployment, node: str, name: str) -> dict[str, Any]:
    logs = d.cluster.docker(node, "logs", d.container(node)).stdout
    line = next((line for line in logs.splitlines() if line.startswith(f"{name} ")), None)
    assert line is not None, f"no {name} in {node}'s log:\n{logs[-3000:]}"
    return json.loads(line.split(" ", 1)[1])


def test_the_mesh_cables_reach_only_their_neighbour(clusters: Clusters) -> None:
    cluster = clusters.get("mesh")
    a, _, c = cluster.nodes
    assert cluster.ports(a) == {PORT0: "10.78.1.1", PORT1: "10.78.3.2"}
    reach = "exec 3<>/dev/tcp/{}/22 && echo reached"
    assert "reached" in cluster.sh(a, reach.format("10.78.1.2")).stdout  # spark2's end of spark1's port 0
    far = cluster.sh(c, reach.format("10.78.1.1"))  # spark1's port 0 from spark3: another cable
    assert "reached" not in far.stdout and "Network is unreachable" in far.stderr


def test_bootstrap_on_a_cable_fails_as_nccl_does(clusters: Clusters, sim_model_dir: Path, tmp_path: Path) -> None:
    """What the scripts did before: NCCL_SOCKET_IFNAME on the CX-7 ports. Rank 0 listens on its port 0,
    which only spark2 is cabled to; spark3 cannot reach it."""
    cluster = clusters.get("mesh")
    d = deployment(cluster, "meshcable", sim_model_dir, tmp_path / "build", {"NCCL_SOCKET_IFNAME": PORT0})
    try:
        launch = d.run("launch-cluster.sh", "--no-probe", timeout=240)
        assert launch.returncode == 1, launch.stdout + launch.stderr
        logs = cluster.docker("spark3", "logs", d.container("spark3"))
        text = logs.stdout + logs.stderr
        assert re.search(r"socketStartConnect: Connect to 10\.78\.1\.1<\d+> failed : Network is unreachable", text), (
            text[-3000:]
        )
        assert f"Bootstrap: Using {PORT0}:10.78.1.1<" in cluster.docker("spark1", "logs", d.container("spark1")).stdout
    finally:
        d.remove()


@pytest.mark.parametrize("topology", ["mesh", "ring"])
def test_a_launch_becomes_ready_with_bootstrap_on_the_control_plane(
    clusters: Clusters, topology: str, sim_model_dir: Path, tmp_path: Path
) -> None:
    cluster = clusters.get(topology)
    d = deployment(cluster, f"{topology}ok", sim_model_dir, tmp_path / "build")
    try:
        # The fabric probe (real torch Gloo on the control plane) once, in the mesh: it takes seconds a node.
        launch = d.run("launch-cluster.sh", *(() if topology == "mesh" else ("--no-probe",)), timeout=240)
        assert launch.returncode == 0, launch.stdout + launch.stderr
        assert ("== probe: one all-reduce" in launch.stdout) == (topology == "mesh"), launch.stdout
        for n in cluster.nodes:
            env = d.standin_env(n.name)["env"]
            assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == MGMT_IF
            assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
            assert env["NCCL_IB_SUBNET_PREFIX_LEN"] == str(PREFIX[topology])
            # The image's NCCL (2.30.7) reads what routes each pair over its own cable; an older one would not.
            nccl = marker(d, n.name, "SPARKC_STANDIN_NCCL")
            assert nccl["reads"] == ["NCCL_IB_SUBNET_AWARE_ROUTING", "NCCL_IB_SUBNET_PREFIX_LEN"], nccl
            assert marker(d, n.name, "SPARKC_STANDIN_NCCL_BOOTSTRAP") == {
                "rank": n.index,
                "ifname": MGMT_IF,
                "address": n.mgmt_ip,
            }
        assert d.run("stop-cluster.sh").returncode == 0
    finally:
        d.remove()


def test_a_ring_listed_out_of_cabling_order_stops_at_preflight(
    clusters: Clusters, sim_model_dir: Path, tmp_path: Path
) -> None:
    """spark2 and spark3 swapped in cluster.nodes: the ranks would go spark1, spark3, spark2, spark4, and
    NCCL's ring would join nodes no cable joins. Each node must reach the one before it over a cable."""
    cluster = clusters.get("ring")
    d = deployment(cluster, "ringorder", sim_model_dir, tmp_path / "build", order=(0, 2, 1, 3))
    run = d.run("launch-cluster.sh", "--preflight-only", timeout=120)
    assert run.returncode != 0, run.stdout
    shown = " ".join((run.stdout + run.stderr).split())
    assert "spark3 reaches spark1, the node before it round the ring, at 10.78.1.1 through" in shown, shown
    assert "not one of its cables" in shown and "fix the order in the spec or the cabling" in shown
    assert not any(cluster.docker(n.name, "ps", "-aq").stdout.strip() for n in cluster.nodes)


MODEL = "/run/sparkc-switchless-model"


def mgmt_sent(cluster: SimCluster) -> dict[str, int]:
    """Bytes each node has sent on the management network (the control plane) so far."""
    path = f"/sys/class/net/{MGMT_IF}/statistics/tx_bytes"
    return {n.name: int(cluster.sh(n, f"cat {path}").stdout) for n in cluster.nodes}


def report(d: Deployment) -> dict[tuple[str, str], dict[str, str]]:
    lines = (d.build / "distribute-report.txt").read_text().splitlines()
    entries = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in lines]
    return {(e["node"], e["item"]): e for e in entries}


def test_distribute_goes_round_the_ring_on_the_cables_and_resumes_after_a_kill(
    clusters: Clusters, sim_model_dir: Path, tmp_path: Path
) -> None:
    """spark3 is cabled to spark2 and spark4 only: its copies come from spark2, which passes on what it
    receives; nothing crosses the control network but the scripts' commands. A copy killed halfway leaves
    pieces on the nodes, and the next run sends only the rest."""
    cluster = clusters.get("ring")
    head, far = cluster.nodes[0], cluster.nodes[2]
    assert not set(cluster.ports(far).values()) & {f"10.78.{i}.{j}" for i in (1, 4) for j in (1, 2)}
    d = deployment(cluster, "ringdist", sim_model_dir, tmp_path / "build", model_path=MODEL, both_ports=True)
    cluster.sh(head.name, f"mkdir -p {MODEL} && head -c 30000000 /dev/urandom > {MODEL}/model.safetensors", check=True)
    for n in cluster.nodes[1:]:
        cluster.break_remove_image(n.name, VLLM_IMAGE)
    tc = ["ip", "netns", "exec", head.netns, "tc"]
    try:
        # The head's cables at 40 Mbit/s: the image takes about 40 s, long enough to kill the copy halfway.
        for dev in (PORT0, PORT1):
            subprocess.run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"], check=True)
            subprocess.run(
                [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", "40mbit"], check=True
            )
        log = tmp_path / "first.log"
        started = cluster.sh(head.name, f"setsid bash {d.build}/distribute.sh --image-only >{log} 2>&1 & echo $!")
        group = started.stdout.strip()
        pieces = "/var/tmp/sparkc-distribute/ringdist/spark3"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            held = cluster.sh(far.name, f"cat {pieces}/* 2>/dev/null | wc -c").stdout.strip()  # whole and partial
            if int(held or 0) > 30_000_000:
                break
            time.sleep(1)
        cluster.sh(head.name, f"kill -- -{group}")
        time.sleep(2)
        assert cluster.image_id(far.name, VLLM_IMAGE) is None, log.read_text()
        for dev in (PORT0, PORT1):
            subprocess.run([*tc, "qdisc", "del", "dev", dev, "root"], check=True)

        before = mgmt_sent(cluster)
        run = d.run("distribute.sh", timeout=300)
        after = mgmt_sent(cluster)
        assert run.returncode == 0, run.stdout + run.stderr
        head_id = cluster.image_id(head.name, VLLM_IMAGE)
        assert all(cluster.image_id(n.name, VLLM_IMAGE) == head_id for n in cluster.nodes)
        listing = f"cd {MODEL} && find . -type f -printf '%P %s\\n' | sort"
        assert cluster.sh(far.name, listing).stdout == cluster.sh(head.name, listing).stdout
        got = report(d)
        assert got["spark3", "image"]["via"] == got["spark3", "model"]["via"] == "spark2"  # round the ring
        assert got["spark2", "image"]["via"] == got["spark4", "image"]["via"] == "spark1"
        assert got["spark3", "image"]["action"] == "resumed" and int(got["spark3", "image"]["resumed"]) > 30_000_000
        image = int(got["spark2", "image"]["bytes"]) + int(got["spark2", "image"]["resumed"])
        assert image > 100_000_000 and int(got["spark3", "image"]["bytes"]) < image - 30_000_000  # only the rest
        # About 200 MB went to the nodes over the cables; the control network carried the commands only.
        sent = {n: after[n] - before[n] for n in after}
        assert max(sent.values()) < 5_000_000, sent
    finally:
        subprocess.run([*tc, "qdisc", "del", "dev", PORT0, "root"], check=False, capture_output=True)
        subprocess.run([*tc, "qdisc", "del", "dev", PORT1, "root"], check=False, capture_output=True)
        for n in cluster.nodes:
            cluster.exec(n.name, ["rm", "-rf", MODEL, "/var/tmp/sparkc-distribute/ringdist"])


def test_host_keys_setup_fabric_then_distribute_on_a_fresh_ring(
    clusters: Clusters, sim_model_dir: Path, tmp_path: Path
) -> None:
    """Four nodes round a ring, by host name: the copies go to control addresses nobody recorded a key for."""
    cluster = clusters.get("ring")
    d = deployment(cluster, "ringkeys", sim_model_dir, tmp_path / "build", model_path=HOST_KEY_MODEL, by_name=True)
    try:
        setup_then_distribute(cluster, d, tmp_path)
    finally:
        for n in cluster.nodes:
            cluster.exec(n.name, ["rm", "-rf", HOST_KEY_MODEL])
