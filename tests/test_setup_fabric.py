"""sparkc setup-fabric: the script for each example is shellcheck-clean (checked when written), says what
it sets per node, and refuses a spec with errors. On nodes: tests/cluster/test_setup_fabric_on_cluster.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from tests.specs import EXAMPLES, dump, example, with_changes


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_every_example_gets_a_script(tmp_path: Path, name: str) -> None:
    result = CliRunner().invoke(cli, ["setup-fabric", str(EXAMPLES / f"{name}.yaml"), "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    script = (tmp_path / "setup-fabric.sh").read_text()
    for node in example(name)["cluster"]["nodes"]:
        assert f"[{node['name']}]={node['fabric']['netdev']}" in script
        assert f"[{node['name']}]={node['fabric']['ip']}/24" in script
    usage = subprocess.run(["bash", str(tmp_path / "setup-fabric.sh"), "--bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_prefix_and_ssh_settings_reach_the_script(tmp_path: Path) -> None:
    spec = with_changes(
        example("llama33-70b-2spark-native"), {"cluster.ssh.port": 2222, "cluster.ssh.options": ["Compression=yes"]}
    )
    (tmp_path / "spec.yaml").write_text(dump(spec))
    args = ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out"), "--prefix-length", "16"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    script = (tmp_path / "out" / "setup-fabric.sh").read_text()
    assert "[spark-b]=192.168.100.11/16" in script and "  2222\n" in script and "  Compression=yes\n" in script
    assert "readonly HEAD_KEY=/home/aurora/.ssh/id_ed25519" in script and "BatchMode" not in script


def test_a_spec_with_errors_writes_nothing(tmp_path: Path) -> None:
    spec = with_changes(example("llama33-70b-2spark-native"), {"cluster.nodes.1.fabric.ip": "not-an-ip"})
    (tmp_path / "spec.yaml").write_text(dump(spec))
    result = CliRunner().invoke(cli, ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "not an IP address" in result.output and not (tmp_path / "out").exists()
