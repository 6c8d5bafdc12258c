"""Mesh and ring clusters (no switch): a cable reaches one neighbour, so bootstrap and sockets go over the
control plane, Ray is refused on a ring, and the links' prefix length reaches NCCL. Also the topology
checks every cabling shares: direct is two nodes, and a value left as init's or import's placeholder."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.pipeline import CompileResult
from tests.fakes.cluster import FakeCluster
from tests.specs import DELETE, compile_spec, diagnostics_text, example, node_env, node_plan, with_changes

MESH = example("qwen3-32b-3spark-mesh")
RING = example("llama33-70b-4spark-ring")
SOCKET_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include")


def _errors(result: CompileResult) -> list[str]:
    text = diagnostics_text(result)
    return [line for line in text.splitlines() if ": " in line and "warning" not in line]


def _ok(spec: dict[str, Any]) -> CompileResult:
    result = compile_spec(spec)
    assert result.ok, diagnostics_text(result)
    assert result.plan is not None
    return result


@pytest.mark.parametrize("spec", [MESH, RING], ids=["mesh", "ring"])
def test_bootstrap_and_sockets_ride_the_control_plane_rdma_stays_on_the_hcas(spec: dict[str, Any]) -> None:
    plan = _ok(spec).plan
    assert plan is not None
    for node in plan.nodes:
        env = node_env(plan, node.name)
        assert {env[name] for name in SOCKET_VARS} == {"enP7s7"}, node.name
        assert env["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0,rocep1s0f1,roceP2p1s0f1"
        assert env["UCX_NET_DEVICES"].startswith("rocep1s0f0:1,")
        assert env["NCCL_IB_SUBNET_AWARE_ROUTING"] == "1"
        assert env["MASTER_ADDR"] == "10.0.0.10" and env["VLLM_HOST_IP"].startswith("10.0.0.")


# The mesh's nodes on a switch: its other ports' /30 addresses would share the switch's /24.
SWITCHED = with_changes(MESH, {f"cluster.nodes.{i}.fabric.addresses": DELETE for i in range(3)})


def test_a_switched_cluster_keeps_its_sockets_on_the_fabric() -> None:
    spec = with_changes(SWITCHED, {"cluster.topology": "switch", "cluster.link_prefix_length": DELETE})
    plan = _ok(spec).plan
    assert plan is not None
    assert node_env(plan, "spark-b")["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0,enp1s0f1np1"
    assert "NCCL_IB_SUBNET_PREFIX_LEN" not in node_env(plan, "spark-b")


def test_the_links_prefix_length_reaches_nccl() -> None:
    assert node_env(_ok(MESH).plan, "spark-c")["NCCL_IB_SUBNET_PREFIX_LEN"] == "30"  # type: ignore[arg-type]
    assert node_env(_ok(RING).plan, "spark-c")["NCCL_IB_SUBNET_PREFIX_LEN"] == "24"  # type: ignore[arg-type]


def test_the_prefix_length_outside_a_mesh_or_ring_is_a_warning() -> None:
    result = compile_spec(with_changes(SWITCHED, {"cluster.topology": "switch"}))
    assert result.ok
    assert any(
        d.severity is Severity.WARNING and d.path == ("cluster", "link_prefix_length") for d in result.diagnostics
    )


@pytest.mark.parametrize("spec", [MESH, RING], ids=["mesh", "ring"])
def test_a_mesh_or_ring_needs_a_control_plane_on_every_node(spec: dict[str, Any]) -> None:
    changes = {f"cluster.nodes.{i}.control": DELETE for i in range(len(spec["cluster"]["nodes"]))}
    result = compile_spec(with_changes(spec, changes))
    errors = _errors(result)
    assert not result.ok
    assert len([e for e in errors if "has no 'control'" in e]) == len(spec["cluster"]["nodes"])
    assert "control: {netdev: enP7s7, ip: <its 10 GbE address>}" in errors[0]
    assert errors[0].startswith("spec.yaml:") and "cluster.nodes[spark-a]" in errors[0]


def test_ray_is_refused_on_a_ring() -> None:
    result = compile_spec(with_changes(RING, {"engine.backend": "ray"}))
    assert not result.ok
    (error,) = [e for e in _errors(result) if "a ring cannot use the Ray backend" in e]  # (the image has no Ray either)
    assert "engine.backend:" in error and "write engine.backend: native" in error
    # Left to its default (Ray for vLLM on several nodes), the error points at the topology.
    result = compile_spec(with_changes(RING, {"engine.backend": DELETE}))
    assert any("cluster.topology:" in e and "Ray" in e for e in _errors(result))


def test_ray_stays_allowed_in_a_mesh() -> None:
    spec = with_changes(MESH, {"engine.backend": "ray", "container.image": "vllm/vllm-openai:v0.11.1"})
    _ok(spec)


def test_a_ring_ranks_go_round_the_cables_from_the_head() -> None:
    plan = _ok(with_changes(RING, {"cluster.head": "spark-c"})).plan
    assert plan is not None
    assert [n.name for n in plan.nodes] == ["spark-c", "spark-d", "spark-a", "spark-b"]
    assert node_env(plan, "spark-a")["MASTER_ADDR"] == "10.0.0.12"


def test_distribute_copies_over_each_workers_own_cable_in_a_mesh() -> None:
    plan = _ok(MESH).plan
    assert plan is not None
    routes = {r.node: r for r in plan.copy_routes}
    # spark-a's port 1 and its twin are cabled to spark-c's port 0 and twin: never the control plane.
    assert routes["spark-c"].source == "spark-a" and routes["spark-c"].cabled
    assert routes["spark-c"].targets == ("aurora@192.168.100.9", "aurora@192.168.101.9")
    assert node_plan(plan, "spark-c").fabric_target == "aurora@10.0.0.12"  # --chain's way, as before
    two = _ok(example("qwen3-32b-2spark-control-data")).plan
    assert two is not None and node_plan(two, "spark-b").fabric_target == "aurora@192.168.100.11"


@pytest.mark.parametrize(
    ("topology", "nodes", "words"),
    [
        ("direct", 3, "direct means two nodes on one cable, but there are 3 nodes"),
        ("mesh", 4, "a mesh without a switch is three nodes"),
        ("ring", 2, "a ring needs at least three nodes"),
    ],
)
def test_a_topology_must_fit_the_node_count(topology: str, nodes: int, words: str) -> None:
    base = RING if nodes >= 3 else example("qwen3-32b-2spark-control-data")
    spec = with_changes(base, {"cluster.topology": topology, "engine.tensor_parallel": nodes})
    spec["cluster"]["nodes"] = spec["cluster"]["nodes"][:nodes]
    result = compile_spec(spec)
    assert not result.ok
    assert any("cluster.topology:" in e and words in e for e in _errors(result)), diagnostics_text(result)


def test_direct_with_two_nodes_is_fine() -> None:
    _ok(with_changes(example("qwen3-32b-2spark-control-data"), {"cluster.topology": "direct"}))


@pytest.mark.parametrize(
    ("key", "value"),
    [("model.path", "/models/CHANGE-ME"), ("cluster.nodes.1.ssh", "PLACEHOLDER-spark-b")],
)
def test_a_value_left_as_a_placeholder_is_an_error(key: str, value: str) -> None:
    result = compile_spec(with_changes(MESH, {key: value}))
    assert not result.ok
    errors = [e for e in _errors(result) if "still holds" in e]
    assert len(errors) == 1 and "write this deployment's real value" in errors[0], diagnostics_text(result)


def _mesh_on_fakes(fake: FakeCluster) -> dict[str, Any]:
    spec = fake.adapt("qwen3-32b-3spark-mesh.yaml")
    for node in spec["cluster"]["nodes"]:  # the 10 GbE, both cabled ports and their twins, as the example has them
        fake.add_netdev(node["name"], node["control"]["netdev"], node["control"]["ip"])
        fabric = node["fabric"]
        for netdev, ip in {fabric["netdev"]: fabric["ip"], **fabric.get("addresses", {})}.items():
            fake.add_netdev(node["name"], netdev, ip)
    fake.compile(spec)
    return spec


def test_a_mesh_refuses_an_nccl_that_ignores_subnet_aware_routing(fake: FakeCluster) -> None:
    """NCCL reads NCCL_IB_SUBNET_AWARE_ROUTING from 2.30.7 on; older, a mesh's peers are not routed each
    over its own cable. The probe reads the image's NCCL and stops the launch before the engine."""
    _mesh_on_fakes(fake)
    (fake.state / "nccl-version").write_text("2.27.3\n")
    old = fake.run("launch-cluster.sh")
    assert old.returncode == 1, old.stdout + old.stderr
    shown = " ".join(old.stderr.split())
    assert "FAILED in phase probe on node spark-a" in shown, shown
    assert "has NCCL 2.27.3, which ignores NCCL_IB_SUBNET_AWARE_ROUTING (read from NCCL 2.30.7 on)" in shown
    assert "use an image with NCCL 2.30.7 or later" in shown
    assert not [argv for _, argv in fake.docker_calls() if argv[:2] == ["run", "-d"] and not fake.is_probe(argv)]
    (fake.state / "nccl-version").write_text("2.30.10\n")  # newer, though "10" sorts before "7" as text
    new = fake.run("launch-cluster.sh", "--yes")
    assert "ignores NCCL_IB_SUBNET_AWARE_ROUTING" not in new.stderr, new.stderr
    assert "probe transport IB, bus bandwidth 21.5 GB/s, NCCL 2.30.10" in new.stdout, new.stdout + new.stderr


@pytest.mark.parametrize(
    ("image", "shown"),
    [
        ("nvcr.io/nvidia/vllm:26.05-py3", "ships NCCL older than 2.30.7"),  # NCCL 2.30.7 did not exist yet
        ("nvcr.io/nvidia/vllm:26.03-py3", "ships NCCL 2.29.7"),  # NVIDIA's release notes name it
    ],
)
@pytest.mark.parametrize("spec", [MESH, RING], ids=["mesh", "ring"])
def test_a_mesh_or_ring_on_an_image_whose_nccl_ignores_subnet_routing_is_refused_at_compile(
    spec: dict[str, Any], image: str, shown: str
) -> None:
    result = compile_spec(with_changes(spec, {"container.image": image}))
    errors = _errors(result)
    assert len(errors) == 1, diagnostics_text(result)
    assert errors[0].startswith(f"spec.yaml:{_image_line(result)}: container.image: {image} {shown}"), errors[0]
    assert "which ignores NCCL_IB_SUBNET_AWARE_ROUTING (read from NCCL 2.30.7 on)" in errors[0]
    assert errors[0].endswith("Use an image with NCCL 2.30.7 or later")


def _image_line(result: CompileResult) -> str:
    """line:col of container.image in the compiled text."""
    return next(f"{d.line}:{d.column}" for d in result.diagnostics if d.path[:2] == ("container", "image"))


def test_an_unknown_nccl_release_warns_and_a_recorded_one_passes(tmp_path: Any) -> None:
    from compiler.pipeline import Beside
    from compiler.spec.profiles import load_user_profiles

    unknown = compile_spec(with_changes(MESH, {"container.image": "nvcr.io/nvidia/vllm:26.10-py3"}))
    assert unknown.ok, diagnostics_text(unknown)
    warnings = [d.message for d in unknown.diagnostics if d.severity is Severity.WARNING]
    assert any("the NCCL release in nvcr.io/nvidia/vllm:26.10-py3 is not known" in w for w in warnings), warnings
    # An operator's profile that records the image's NCCL settles it at compile time, either way.
    folder = tmp_path / "profiles"
    folder.mkdir()
    for release, ok in (("2.30.7", True), ("2.30.4", False)):
        (folder / "mine.yaml").write_text(
            "family: mine\nmatch: [example/vllm]\nengine: vllm\nargs: engine-args\nentrypoint: [vllm, serve]\n"
            f"ray: absent\nauto: keep\nnccl: {{release: '{release}'}}\nsources: [me]\n"
        )
        spec = with_changes(MESH, {"container.image": "example/vllm:mine"})
        result = compile_spec(spec, beside=Beside(profiles=load_user_profiles(folder)))
        assert result.ok is ok, diagnostics_text(result)
        assert "NCCL release" not in diagnostics_text(result)
        assert ok or f"example/vllm:mine ships NCCL {release}, which ignores" in diagnostics_text(result)


def test_without_rdma_devices_the_nccl_release_does_not_matter() -> None:
    """Without RDMA NCCL's sockets take the control netdev; subnet-aware routing picks RDMA devices only."""
    nodes = [
        {**n, "fabric": {**{k: v for k, v in n["fabric"].items() if k != "hcas"}, "transport": "sockets"}}
        for n in MESH["cluster"]["nodes"]
    ]
    result = compile_spec(
        with_changes(MESH, {"container.image": "nvcr.io/nvidia/vllm:26.05-py3", "cluster.nodes": nodes})
    )
    assert result.ok and "NCCL_IB_SUBNET_AWARE_ROUTING" not in diagnostics_text(result), diagnostics_text(result)
