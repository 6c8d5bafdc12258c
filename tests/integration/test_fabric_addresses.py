"""cluster.nodes[].fabric.addresses: the address of each fabric netdev other than fabric.netdev (the twins,
the other cable's port in a mesh or ring). Every problem is an error at its line and column, all in one run."""

from __future__ import annotations

import re

from tests.specs import compile_spec, diagnostics_text, example, with_changes

NATIVE = example("llama33-70b-2spark-native")  # spark-a on enp1s0f1np1, spark-b on enp1s0f0np0, both /24
MESH = example("qwen3-32b-3spark-mesh")  # /30 cables


def _errors(spec: dict[str, object]) -> list[str]:
    result = compile_spec(spec)
    lines = diagnostics_text(result).splitlines()
    return [line for line in lines if re.match(r"spec\.yaml:\d+:\d+: ", line) and ": warning: " not in line]


def test_the_examples_addresses_compile_and_reach_the_typed_spec() -> None:
    result = compile_spec(MESH)
    assert result.ok, diagnostics_text(result)
    planes = example("qwen3-32b-2spark-control-data")
    assert compile_spec(planes).ok
    assert planes["cluster"]["nodes"][0]["fabric"]["addresses"] == {"enP2p1s0f1np1": "192.168.101.10"}


def test_each_problem_of_the_mapping_is_an_error_at_its_place_in_one_run() -> None:
    spec = with_changes(
        NATIVE,
        {
            "cluster.nodes.0.fabric.addresses": {
                "enp1s0f1np1": "192.168.101.10",  # fabric.netdev: its address is fabric.ip
                "enP2p1s0f1np1": "192.168.100.20",  # the twin on fabric.ip's /24
                "enP2p1s0f0np0": "192.168.102.10",  # a twin of a port this node has not cabled
                "enp1s0f0np0": "192.168.103.10/24",  # not in netdevs, and with a prefix
            },
            "cluster.nodes.1.fabric.addresses": {"enP2p1s0f0np0": "192.168.100.10"},  # spark-a's fabric IP
        },
    )
    errors = _errors(spec)
    assert len(errors) == 6, errors
    text = "\n".join(errors)
    assert re.search(r"enp1s0f1np1: enp1s0f1np1 is fabric.netdev, whose address is fabric.ip: remove it", text)
    assert re.search(
        r"192.168.100.20 is on 192.168.100.0/24 with fabric.ip 192.168.100.10 \(enp1s0f1np1\): each fabric netdev "
        r"of a node needs a /24 subnet of its own \(NVIDIA puts a twin on the next /24: 192.168.101.20\)",
        text,
    )
    assert "enP2p1s0f0np0 is not a fabric netdev of spark-a: write one of fabric.netdevs or a twin of one" in text
    assert "'192.168.103.10/24' must be the fabric address alone, without the prefix length" in text
    assert "192.168.100.10 is already the fabric IP of spark-a; every address is used once" in text
    # Each at the line of its own entry: the key for a wrong netdev, the value for a wrong address.
    lines = {int(e.split(":")[1]) for e in errors}
    assert len(lines) == 5


def test_addresses_are_ipv4_and_used_once_across_nodes() -> None:
    spec = with_changes(
        NATIVE,
        {
            "cluster.nodes.0.fabric.addresses": {"enP2p1s0f1np1": "192.168.101.10"},
            "cluster.nodes.1.fabric.addresses": {"enP2p1s0f0np0": "192.168.101.10"},
        },
    )
    assert [e.split(": ", 2)[2] for e in _errors(spec)] == [
        "192.168.101.10 is already the address of enP2p1s0f1np1 on spark-a; every address is used once in the cluster"
    ]
    v6 = with_changes(NATIVE, {"cluster.nodes.0.fabric.addresses": {"enP2p1s0f1np1": "fd00::10"}})
    assert "fd00::10 is IPv6: RoCE v2 needs an IPv4 address" in "\n".join(_errors(v6))
    bad_name = with_changes(NATIVE, {"cluster.nodes.0.fabric.addresses": {"en p1": "192.168.101.10"}})
    assert "must be a network interface name" in "\n".join(_errors(bad_name))


def test_in_a_mesh_the_subnet_is_the_cables_prefix() -> None:
    """192.168.100.1 and .10 share a /24 but not a /30: fine on a /30 mesh, an error on /24 cables."""
    assert compile_spec(MESH).ok
    wide = with_changes(MESH, {"cluster.link_prefix_length": 24})
    errors = "\n".join(_errors(wide))
    assert "192.168.100.10 is on 192.168.100.0/24 with fabric.ip 192.168.100.1 (enp1s0f0np0)" in errors
    # The other cable's port and the twins of both ports are the node's fabric netdevs.
    assert "not a fabric netdev" not in errors
