"""Host keys on the simulated cluster, as strict as on real Sparks: every node has its own key and its own
~/.ssh, and ssh checks keys as OpenSSH does by default. On a head that knows no host key yet, setup-fabric
changes nothing and says how to record them (one checked ssh to each node); once they are recorded by the
nodes' ssh names, setup-fabric passes, and distribute.sh copies over the fabric (or, in a ring, the
control) addresses, whose keys nobody recorded: HostKeyAlias checks them under the ssh name.

The 2-node case runs here on the session's cluster; the 4-node ring in test_switchless_on_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy, Deployment
from tests.specs import DELETE, dump

pytestmark = pytest.mark.cluster

MODEL = "/run/sparkc-hostkey-model"  # /run is each node's own: the folder is missing on the workers


@contextmanager
def no_known_hosts(cluster: SimCluster) -> Iterator[None]:
    """The head as fresh as a new Spark: an empty ~/.ssh/known_hosts; the session's record comes back after."""
    path = cluster.known_hosts(cluster.head)
    saved = path.read_bytes() if path.exists() else None
    path.write_bytes(b"")
    try:
        yield
    finally:
        if saved is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(saved)


def setup_fabric(d: Deployment, folder: Path) -> str:
    """`sparkc setup-fabric` on the deployment's spec; the script's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.yaml").write_text(dump(d.spec))
    made = CliRunner().invoke(cli, ["setup-fabric", str(folder / "spec.yaml"), "-o", str(folder / "setup")])
    assert made.exit_code == 0, made.output
    return str(folder / "setup" / "setup-fabric.sh")


def by_name(cluster: SimCluster, count: int) -> list[dict[str, object]]:
    """cluster.nodes as an operator writes them: ssh by host name (the nodes' /etc/hosts resolve it)."""
    return [
        {
            "name": n.name,
            "ssh": n.name,
            "fabric": {"ip": n.fabric_ip, "netdev": n.fabric_netdev, "transport": "sockets"},
        }
        for n in cluster.nodes[:count]
    ]


def setup_then_distribute(cluster: SimCluster, d: Deployment, folder: Path) -> None:
    """On a head that knows no host key: distribute and setup-fabric refuse, saying how to fix it; after
    the operator's checked first ssh to each node (by its ssh name), both pass, and no other name or
    address of any node was recorded."""
    head, workers = cluster.head, [cluster.node(n) for n in d.nodes[1:]]
    script = setup_fabric(d, folder)
    cluster.sh(head.name, f"mkdir -p {MODEL} && head -c 300000 /dev/urandom > {MODEL}/model.safetensors", check=True)
    for worker in workers:
        cluster.break_remove_image(worker.name, VLLM_IMAGE)
    with no_known_hosts(cluster):
        copy = d.run("distribute.sh", timeout=240)
        assert copy.returncode == 1, copy.stdout + copy.stderr
        assert "Host key verification failed" in copy.stderr, copy.stderr
        assert f"connect once with ssh root@{workers[0].name}" in " ".join(copy.stderr.split()), copy.stderr

        first = cluster.exec(head.name, ["bash", script], timeout=240)
        assert first.returncode == 1, first.stdout + first.stderr
        said = " ".join(first.stderr.split())
        assert "Host key verification failed" in said
        assert f"this machine does not know the host key of root@{workers[0].name} yet" in said, said
        assert "setup-fabric: nothing was changed" in said

        # What the message asks: one ssh to each node by its ssh name, fingerprint compared, "yes".
        cluster.record_host_keys(head, {n: n for n in d.nodes})
        second = cluster.exec(head.name, ["bash", script], timeout=240)
        assert second.returncode == 0, second.stdout + second.stderr
        for worker in workers:
            assert f"{head.name}: reaches {worker.name} (root@{worker.name}), its host key known" in second.stdout

        copy = d.run("distribute.sh", timeout=240)
        assert copy.returncode == 0, copy.stdout + copy.stderr
        head_id = cluster.image_id(head.name, VLLM_IMAGE)
        listing = f"cd {MODEL} && find . -type f -printf '%P %s\\n'"
        for worker in workers:
            assert cluster.image_id(worker.name, VLLM_IMAGE) == head_id
            assert cluster.sh(worker.name, listing).stdout == cluster.sh(head.name, listing).stdout
        recorded = {line.split()[0] for line in cluster.known_hosts(head).read_text().splitlines()}
        assert recorded == set(d.nodes), recorded  # the copies' addresses needed no records of their own


def test_host_keys_setup_fabric_then_distribute_on_two_fresh_nodes(
    deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "hostkeys",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": DELETE,
            "model.path": MODEL,
            "cluster.nodes": by_name(sim_cluster, 2),
        },
    )
    try:
        setup_then_distribute(sim_cluster, d, tmp_path)
    finally:
        for node in sim_cluster.nodes:
            sim_cluster.exec(node.name, ["rm", "-rf", MODEL])
