"""sparkc init: the starter spec compiles once its CHANGE-ME is replaced, from placeholders or discover's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.diagnostics import Severity
from compiler.pipeline import compile_text
from compiler.tools import discover as disc
from compiler.tools.init_spec import CHANGE
from compiler.tools.probe import parse

DATA = Path(__file__).parent.parent / "data" / "discover"


def _compiled(path: Path) -> list[str]:
    """The fabric IPs of the starter spec once its weights' path is replaced; before, validation says
    which value is still a placeholder."""
    text = path.read_text()
    if "CHANGE-ME" in text:
        left = compile_text(text, str(path))
        # the one error is the placeholder (an image's warnings, an NCCL release sparkc cannot tell, may stand beside)
        errors = [d for d in left.diagnostics if d.severity is Severity.ERROR]
        assert not left.ok and ["/models/CHANGE-ME" in d.message for d in errors] == [True]
        text = text.replace("/models/CHANGE-ME", "/models/Qwen3-32B")
    result = compile_text(text, str(path))
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.plan is not None
    return [n.fabric_ip for n in result.plan.nodes]


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_starter_spec_for_n_nodes_compiles_and_marks_what_to_change(tmp_path: Path, nodes: int) -> None:
    out = tmp_path / "spec.yaml"
    result = CliRunner().invoke(cli, ["init", "--nodes", str(nodes), "-o", str(out)])
    assert result.exit_code == 0, result.output
    # One node alone needs no fabric: it talks to itself over loopback.
    fabric = ["127.0.0.1"] if nodes == 1 else [f"192.168.100.{10 + i}" for i in range(nodes)]
    assert _compiled(out) == fabric
    text = out.read_text()
    assert text.count("ip: 192.168.100.1") == (nodes if nodes > 1 else 0) and "path: /models/CHANGE-ME" in text
    assert all(CHANGE in line for line in text.splitlines() if line.strip().startswith(("ip:", "image:", "path:")))


def test_from_discover_takes_the_discovered_cluster(tmp_path: Path) -> None:
    facts = [
        parse(h, (DATA / f).read_text())
        for h, f in [("a.lan", "spark-a-both-ports.out"), ("b.lan", "spark-b-crosscabled.out")]
    ]
    found = tmp_path / "cluster.yaml"
    found.write_text(disc.to_yaml(disc.choose(facts), disc.SshSettings("aurora"), {}))
    out = tmp_path / "spec.yaml"
    result = CliRunner().invoke(cli, ["init", "--from-discover", str(found), "-o", str(out), "--name", "qwen"])
    assert result.exit_code == 0, result.output
    assert _compiled(out) == ["192.168.100.10", "192.168.100.11"]
    text = out.read_text()
    assert "netdev: enp1s0f0np0" in text and "user: aurora" in text and "ssh: b.lan" in text
    assert "        addresses: {enP2p1s0f0np0: 192.168.101.11}\n" in text  # the twin's own, for setup-fabric
    assert "fabric address" not in text  # discovered values are not placeholders


def test_from_a_discovered_mesh_keeps_its_cabling_and_asks_for_the_control_plane(tmp_path: Path) -> None:
    facts = [parse(f"m{i}.lan", (DATA / f"spark-m{i}-mesh.out").read_text()) for i in (1, 2, 3)]
    found = tmp_path / "cluster.yaml"
    found.write_text(disc.to_yaml(disc.choose(facts), disc.SshSettings("aurora"), {}))
    out = tmp_path / "spec.yaml"
    result = CliRunner().invoke(cli, ["init", "--from-discover", str(found), "-o", str(out), "--name", "qwen"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "  topology: mesh\n  link_prefix_length: 30\n" in text
    assert f"      control: {{netdev: enP7s7, ip: 10.0.0.11}}  {CHANGE} this node's 10 GbE address\n" in text
    assert "        netdevs: [enp1s0f0np0, enp1s0f1np1]\n" in text
    assert (
        "        addresses: {enP2p1s0f0np0: 192.168.101.9, enp1s0f1np1: 192.168.100.6, enP2p1s0f1np1: 192.168.101.6}\n"
        in text
    )
    assert _compiled(out) == ["192.168.100.1", "192.168.100.5", "192.168.100.9"]


def test_never_overwrites_and_refuses_what_is_not_discover_output(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    out.write_text("mine\n")
    result = CliRunner().invoke(cli, ["init", "-o", str(out)])
    assert result.exit_code == 2 and "never overwrites" in result.output and out.read_text() == "mine\n"
    bad = tmp_path / "bad.yaml"
    for text, words in [
        ("nodes: []\n", "not what sparkc discover writes"),
        ("cluster:\n  nodes: [{name: a}]\n", "lacks"),
    ]:
        bad.write_text(text)
        result = CliRunner().invoke(cli, ["init", "--from-discover", str(bad), "-o", str(tmp_path / "n.yaml")])
        assert result.exit_code == 2 and words in result.output, result.output
    result = CliRunner().invoke(
        cli, ["init", "--from-discover", str(tmp_path / "none.yaml"), "-o", str(tmp_path / "n.yaml")]
    )
    assert result.exit_code == 2 and "no such file" in result.output
    result = CliRunner().invoke(cli, ["init", "--name", "Bad Name", "-o", str(tmp_path / "n.yaml")])
    assert result.exit_code == 2 and "would not validate" in result.output and not (tmp_path / "n.yaml").exists()


@pytest.mark.parametrize(("nodes", "layout"), [(3, (1, 3)), (4, (4, 1)), (6, (2, 3))])
def test_a_node_count_no_model_divides_gets_pipeline_parallel(tmp_path: Path, nodes: int, layout: tuple) -> None:
    """Tensor parallel must divide the model's attention heads, nearly always a power of two: TP=3 fits
    almost nothing, so three nodes start as TP=1 x PP=3."""
    out = tmp_path / "spec.yaml"
    assert CliRunner().invoke(cli, ["init", "--nodes", str(nodes), "-o", str(out)]).exit_code == 0
    result = compile_text(out.read_text().replace("/models/CHANGE-ME", "/models/m"), str(out), render_files=False)
    assert result.ok and result.plan is not None, [d.message for d in result.diagnostics]
    engine = {s.name: s.value for s in result.plan.settings}
    assert (int(engine["tensor_parallel"]), int(engine["pipeline_parallel"])) == layout
