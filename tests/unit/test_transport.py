"""How NCCL crosses the fabric: several nodes list their RDMA devices, or say `transport: sockets` on purpose.

NCCL without RDMA devices falls back to TCP sockets (about 100x slower) without failing, so a deployment
would come up healthy at socket speed; sparkc refuses that unless the spec asks for it, and never mixes the two.
`sparkc import` and `sparkc init --from-discover` fill hcas where they can, else leave a placeholder the
compile refuses with the fix.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.pipeline import compile_text
from compiler.resolve.rules.cluster import is_placeholder_left
from compiler.tools.importer import import_recipe
from tests.specs import DELETE, ROOT, compile_spec, diagnostics_text, dump, example, node_env, with_changes

NATIVE = example("llama33-70b-2spark-native")
NO_HCAS = {f"cluster.nodes.{i}.fabric.hcas": DELETE for i in (0, 1)}
SOCKETS = {**NO_HCAS, **{f"cluster.nodes.{i}.fabric.transport": "sockets" for i in (0, 1)}}


def _errors(spec: dict) -> list[tuple[str, str]]:
    """(the spec's line the error points at, its message) for every error."""
    text = dump(spec)
    result = compile_text(text, "spec.yaml", render_files=False)
    lines = text.splitlines()
    return [(lines[d.line - 1].strip(), d.message) for d in result.diagnostics if d.severity is Severity.ERROR]


def test_several_nodes_without_rdma_devices_are_refused_at_each_nodes_fabric() -> None:
    errors = _errors(with_changes(NATIVE, NO_HCAS))
    assert [line for line, _ in errors] == ["fabric:", "fabric:"], errors
    first, second = (message for _, message in errors)
    assert first.startswith("spark-a lists no RDMA devices (fabric.hcas): NCCL would cross the fabric over TCP")
    assert "about 100x slower" in first and "write transport: sockets on every node" in first
    # The names the kernel gives the node's own CX-7 port (both twins), as an example to check.
    assert "hcas: [rocep1s0f1, roceP2p1s0f1]" in first and "hcas: [rocep1s0f0, roceP2p1s0f0]" in second


def test_sockets_on_purpose_compile_without_rdma_and_say_why() -> None:
    result = compile_spec(with_changes(NATIVE, SOCKETS))
    assert result.ok and result.plan, diagnostics_text(result)
    settings = {s.name: s for s in result.plan.nodes[1].env}
    assert settings["NCCL_IB_DISABLE"].value == "1" and "NCCL_IB_HCA" not in settings
    assert "fabric.transport: sockets" in settings["NCCL_IB_DISABLE"].why
    assert not result.plan.nccl_check


def test_one_node_with_rdma_devices_beside_one_without_is_an_error() -> None:
    errors = _errors(with_changes(NATIVE, {"cluster.nodes.1.fabric.hcas": DELETE}))
    assert len(errors) == 1 and errors[0][0] == "fabric:", errors
    assert "spark-b lists no RDMA devices (fabric.hcas) while spark-a lists some" in errors[0][1]
    assert "NCCL must use one transport on every rank" in errors[0][1]
    mixed = with_changes(NATIVE, {"cluster.nodes.1.fabric.hcas": DELETE, "cluster.nodes.1.fabric.transport": "sockets"})
    errors = _errors(mixed)
    assert [line for line, _ in errors] == ["transport: sockets"], errors
    assert "spark-b uses sockets while spark-a lists RDMA devices" in errors[0][1]


def test_sockets_beside_rdma_devices_on_one_node_is_a_contradiction() -> None:
    errors = _errors(with_changes(NATIVE, {f"cluster.nodes.{i}.fabric.transport": "sockets" for i in (0, 1)}))
    assert [line for line, _ in errors] == ["transport: sockets", "transport: sockets"], errors
    assert "remove transport to use them, or remove hcas to use sockets" in errors[0][1]


def test_one_node_needs_no_rdma_devices() -> None:
    result = compile_spec(example("solo-qwen3-32b"))
    assert result.ok and result.plan, diagnostics_text(result)
    assert node_env(result.plan, "spark-a")["NCCL_IB_DISABLE"] == "1"


RECIPE = ROOT / "tests" / "recipes" / "eugr-style.yaml"


def _recipe(env: str) -> str:
    """The two-node test recipe without build_args (a warning of its own), with `env` lines added."""
    text = RECIPE.read_text().replace("build_args:\n  - --rebuild-vllm\n", "")
    return text.replace("env:\n", f"env:\n{env}")


def test_import_takes_the_recipes_nccl_ib_hca_as_each_nodes_hcas() -> None:
    imported = import_recipe(_recipe('  NCCL_IB_HCA: "=rocep1s0f1,roceP2p1s0f1"\n'), "r.yaml")
    spec = imported.spec_text
    assert spec.count("      - =rocep1s0f1\n      - roceP2p1s0f1\n") == 2, spec
    assert "NCCL_IB_HCA" not in spec.split("container:")[1]  # sparkc writes it from hcas now
    result = compile_text(spec, "spec.yaml", render_files=False)
    assert all(is_placeholder_left(d) for d in result.diagnostics if d.severity is Severity.ERROR)
    assert not any("hcas" in d.path for d in result.diagnostics if d.severity is Severity.ERROR)


def test_import_without_nccl_ib_hca_leaves_a_placeholder_the_compile_refuses_with_the_fix() -> None:
    imported = import_recipe(_recipe(""), "r.yaml")
    result = compile_text(imported.spec_text, "spec.yaml", render_files=False)
    about_hcas = [d for d in result.diagnostics if "hcas" in d.path]
    assert [d.severity for d in about_hcas] == [Severity.ERROR, Severity.ERROR], about_hcas
    assert all(is_placeholder_left(d) for d in about_hcas)
    assert "RDMA devices of this node's cabled CX-7 port" in about_hcas[0].message
    assert "transport: sockets on every node" in about_hcas[0].message


def test_init_from_discover_fills_hcas_or_marks_what_discover_did_not_find(tmp_path: Path) -> None:
    found = tmp_path / "cluster.yaml"
    found.write_text(
        "cluster:\n  nodes:\n"
        "  - {name: spark-a, ssh: a.lan, fabric: {ip: 192.168.100.10, netdev: enp1s0f1np1, "
        "hcas: [rocep1s0f1, roceP2p1s0f1]}}\n"
        "  - {name: spark-b, ssh: b.lan, fabric: {ip: 192.168.100.11, netdev: enp1s0f1np1}}\n"
    )
    out = tmp_path / "spec.yaml"
    made = CliRunner().invoke(cli, ["init", "--from-discover", str(found), "-o", str(out)])
    assert made.exit_code == 0, made.output
    text = out.read_text()
    assert "        hcas: [rocep1s0f1, roceP2p1s0f1]\n" in text
    assert "        hcas: [PLACEHOLDER]  # CHANGE: discover found no RDMA device" in text
    result = compile_text(text.replace("/models/CHANGE-ME", "/models/m"), str(out), render_files=False)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert [d.path for d in errors] == [("cluster", "nodes", 1, "fabric", "hcas", 0)], errors
