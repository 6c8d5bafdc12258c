"""distribute.sh's routes as the compiler plans them: along the cables, by the fewest hops from the head."""

from __future__ import annotations

from compiler.resolve.copy_routes import CopyNode, copy_routes


def ring(count: int) -> list[CopyNode]:
    """Node i's port 0 cabled to node i+1's port 1 (10.78.<i+1>.1 -> .2), the last to the first; twins on 10.79."""
    nodes = []
    for i in range(count):
        before = (i - 1) % count
        addresses = (f"10.78.{i + 1}.1", f"10.78.{before + 1}.2", f"10.79.{i + 1}.1", f"10.79.{before + 1}.2")
        nodes.append(CopyNode(f"n{i}", addresses, f"10.0.0.{i + 10}"))
    return nodes


def test_a_ring_passes_the_copy_on_from_neighbour_to_neighbour_over_both_twins() -> None:
    routes = {r.node: r for r in copy_routes(ring(4), 24, "admin")}
    assert {n: r.source for n, r in routes.items()} == {"n1": "n0", "n2": "n1", "n3": "n0"}
    assert routes["n1"].targets == ("admin@10.78.1.2", "admin@10.79.1.2")  # n0's port 0 cable and its twin
    assert routes["n2"].targets == ("admin@10.78.2.2", "admin@10.79.2.2")  # from n1, not the control network
    assert routes["n3"].targets == ("admin@10.78.4.1", "admin@10.79.4.1")  # n0's port 1 cable
    assert all(r.cabled for r in routes.values())


def test_a_mesh_feeds_each_worker_over_its_own_cable() -> None:
    routes = copy_routes(ring(3), 30, None)
    assert [(r.node, r.source, r.targets) for r in routes] == [
        ("n1", "n0", ("10.78.1.2", "10.79.1.2")),
        ("n2", "n0", ("10.78.3.1", "10.79.3.1")),
    ]


def test_a_switched_fabric_is_a_star_and_a_node_no_cable_reaches_takes_the_control_network() -> None:
    nodes = [CopyNode("a", ("192.168.100.10",), "10.0.0.1"), CopyNode("b", ("192.168.100.11",), "10.0.0.2")]
    nodes.append(CopyNode("c", ("172.16.0.5",), "10.0.0.3"))  # on no subnet of the others
    routes = copy_routes(nodes, 24, "u")
    assert [(r.node, r.source, r.targets, r.cabled) for r in routes] == [
        ("b", "a", ("u@192.168.100.11",), True),
        ("c", "a", ("u@10.0.0.3",), False),
    ]


def test_ipv6_addresses_are_bracketed() -> None:
    nodes = [CopyNode("a", ("fd00::1",), "fd01::1"), CopyNode("b", ("fd00::2",), "fd01::2")]
    assert copy_routes(nodes, 24, "u")[0].targets == ("u@[fd00::2]",)
