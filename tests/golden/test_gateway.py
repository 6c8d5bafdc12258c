"""The gateway of deployments compiled together (`sparkc compile A B -o OUT` writes OUT/gateway/): LiteLLM's config
and the scripts that run it on the head, what it refuses (its port taken, a model name served twice), and keys
only ever by the name of their variable."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from compiler.cli import gateway as cli_gateway
from compiler.cli.main import cli
from compiler.resolve import gateway as resolve_gateway
from tests.golden.test_examples import SNAPSHOTS, nested
from tests.golden.test_side_by_side import BIG, SMALL, _line, _pair
from tests.specs import ROOT

# The small deployment behind an API key, and with an alias: both reach the gateway's config by name.
KEYED = {"container.secrets": ["VLLM_API_KEY"], "model.aliases": ["qwen-small"]}


def _compile(folder: Path, *options: str) -> Any:
    specs = [str(folder / BIG), str(folder / SMALL)]
    return CliRunner().invoke(cli, ["compile", *specs, "-o", str(folder / "out"), *options])


def _run(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_gateway_folder_matches_its_snapshot(tmp_path: Path, snapshot: Any) -> None:
    folder = _pair(tmp_path, small=KEYED)
    result = _compile(folder)
    assert result.exit_code == 0, result.output
    gateway = folder / "out" / "gateway"
    files = {p.name: p.read_text() for p in gateway.iterdir()}
    assert sorted(files) == ["PLAN.md", "litellm-config.yaml", "manifest.json", "start-gateway.sh", "stop-gateway.sh"]
    # The snapshot must not depend on where the test ran: the folder's path is in the spec paths only.
    files = {name: text.replace(str(folder), "PAIR") for name, text in files.items()}
    snapshot.snapshot_dir = SNAPSHOTS / "examples"
    snapshot.assert_match_dir(nested(files), "side-by-side-gateway")
    assert f"compiled the gateway -> {gateway}/" in result.output


def test_every_name_is_routed_and_keys_appear_by_reference_only(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small=KEYED)
    assert _compile(folder).exit_code == 0
    gateway = folder / "out" / "gateway"
    config = (gateway / "litellm-config.yaml").read_text()
    from ruamel.yaml import YAML

    loaded = YAML(typ="safe").load(config)
    routes = {m["model_name"]: m["litellm_params"] for m in loaded["model_list"]}
    assert sorted(routes) == ["llama-3.3-70b", "qwen-small", "qwen3-8b"]
    assert routes["qwen-small"] == {
        "model": "openai/qwen-small",
        "api_base": "http://127.0.0.1:8001/v1",
        "api_key": "os.environ/VLLM_API_KEY",
    }
    assert routes["llama-3.3-70b"]["api_base"] == "http://127.0.0.1:8000/v1"
    # a deployment behind a key: the gateway requires its own, also by reference
    assert loaded["general_settings"] == {"master_key": "os.environ/SPARKC_GATEWAY_KEY"}
    env = {"PATH": "/usr/bin:/bin", "VLLM_API_KEY": "sk-very-secret", "SPARKC_GATEWAY_KEY": "sk-gateway-secret"}
    shown = _run(gateway / "start-gateway.sh", "--dry-run", env=env)
    assert shown.returncode == 0, shown.stderr
    run = next(line for line in shown.stdout.splitlines() if line.startswith("docker run"))
    assert "--env SPARKC_GATEWAY_KEY --env VLLM_API_KEY " in run  # by name: docker reads the values itself
    assert "secret" not in shown.stdout + shown.stderr
    assert run.endswith("ghcr.io/berriai/litellm:v1.89.4 --config /etc/sparkc-gateway/config.yaml --port 4000")
    assert f"--volume {gateway}/litellm-config.yaml:/etc/sparkc-gateway/config.yaml:ro" in run
    for text in (p.read_text() for p in gateway.iterdir()):
        assert "sk-" not in text


def test_start_refuses_without_the_keys_it_passes(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small=KEYED)
    assert _compile(folder).exit_code == 0
    refused = _run(folder / "out" / "gateway" / "start-gateway.sh", env={"PATH": "/usr/bin:/bin"})
    assert refused.returncode == 2
    assert "set SPARKC_GATEWAY_KEY VLLM_API_KEY in this environment first" in refused.stderr
    usage = _run(folder / "out" / "gateway" / "start-gateway.sh", "-h")
    assert usage.returncode == 0 and "  qwen-small -> qwen3-8b\n" in usage.stdout
    assert _run(folder / "out" / "gateway" / "start-gateway.sh", "--timeout", "soon").returncode == 2
    stop = _run(folder / "out" / "gateway" / "stop-gateway.sh", "--dry-run")
    assert stop.stdout == "docker rm -f sparkc-gateway-4000\n"


def test_a_port_of_a_deployment_is_refused_as_the_gateways(tmp_path: Path) -> None:
    folder = _pair(tmp_path)
    result = _compile(folder, "--gateway-port", "8001")
    small = folder / SMALL
    assert result.exit_code == 1 and not (folder / "out").exists()
    at = f"{small}:{_line(small, 'port:')}:9: engine.port: port 8001 on spark-a is qwen3-8b's API port and the"
    assert at in result.output, result.output
    assert "compile with --gateway-port and another port" in result.output
    # another port passes, and the gateway is where it says
    result = _compile(folder, "--gateway-port", "8100")
    assert result.exit_code == 0, result.output
    assert "http://spark-a.local:8100/v1 on spark-a" in result.output


def test_a_model_name_served_by_two_deployments_names_both_specs(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"model.aliases": ["llama-3.3-70b"]})
    small = folder / SMALL
    line = _line(small, "aliases:") + 1  # the list, below its key
    at, said = (
        f"{small}:{line}:3: model.aliases: ",
        (f"model name 'llama-3.3-70b' is served by qwen3-8b ({SMALL}) and by llama33-70b ({BIG})"),
    )
    # asked for by its port: an error, nothing written
    result = _compile(folder, "--gateway-port", "4000")
    assert result.exit_code == 1 and not (folder / "out").exists()
    assert f"{at}{said}: the gateway routes each name to one deployment" in result.output, result.output
    # not asked for: the deployments compile as they did before gateways, without one, and the warning says why
    result = _compile(folder)
    assert result.exit_code == 0, result.output
    assert f"{at}warning: {said}, so no gateway is written: the gateway routes each name" in result.output
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["llama33-70b", "qwen3-8b"]
    result = _compile(folder, "--no-gateway")
    assert result.exit_code == 0 and "gateway" not in result.output, result.output


def test_the_default_port_moves_past_a_deployments_port(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"engine.port": 4000})
    result = _compile(folder)
    assert result.exit_code == 0, result.output
    assert "http://spark-a.local:4001/v1 on spark-a" in result.output


def test_a_deployment_on_another_head_is_reached_at_its_endpoint(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"cluster.nodes": ["spark-b"]})
    assert _compile(folder).exit_code == 0
    manifest = json.loads((folder / "out" / "gateway" / "manifest.json").read_text())
    bases = {r["deployment"]: r["api_base"] for r in manifest["gateway"]["routes"]}
    # the gateway runs on the first deployment's head, spark-a: qwen3-8b's head is spark-b
    assert manifest["gateway"]["node"] == "spark-a"
    assert bases == {"llama33-70b": "http://127.0.0.1:8000/v1", "qwen3-8b": "http://spark-b.local:8001/v1"}


def test_a_deployment_named_gateway_leaves_the_gateway_out_or_is_refused_where_one_was_asked(tmp_path: Path) -> None:
    folder = _pair(tmp_path, small={"name": "gateway"})
    said = "deployment 'gateway' is written to gateway/, where the gateway of these deployments goes"
    result = _compile(folder)
    assert result.exit_code == 0 and f"{said}, so no gateway is written" in result.output, result.output
    assert not (folder / "out" / "gateway" / "start-gateway.sh").exists()
    result = _compile(folder, "--gateway-port", "4000")
    assert result.exit_code == 1 and f"{said}: give it another name" in result.output, result.output


def test_check_compares_the_gateway_folder_too(tmp_path: Path) -> None:
    folder = _pair(tmp_path)
    assert _compile(folder).exit_code == 0
    assert _compile(folder, "--check").exit_code == 0
    config = folder / "out" / "gateway" / "litellm-config.yaml"
    config.write_text(config.read_text().replace("8001", "8002"))
    checked = _compile(folder, "--check", "--format", "json")
    assert checked.exit_code == 1
    document = json.loads(checked.output)
    assert document["gateway"]["differences"] == ["litellm-config.yaml (differs)"]


def test_a_link_at_the_gateway_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = _pair(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "out").mkdir()
    (folder / "out" / "gateway").symlink_to(elsewhere)
    result = _compile(folder)
    assert result.exit_code == 2
    assert f"{folder / 'out' / 'gateway'} is a symbolic link" in result.output
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["gateway"]  # no deployment written either


def test_the_pinned_release_is_the_same_everywhere() -> None:
    """The CLI's defaults (literals, so that --help loads no compiler), the simulated cluster's LiteLLM and the
    image tag name one release."""
    version = resolve_gateway.LITELLM_VERSION
    assert cli_gateway.DEFAULT_IMAGE == resolve_gateway.LITELLM_IMAGE == f"ghcr.io/berriai/litellm:v{version}"
    assert (cli_gateway.DEFAULT_PORT, cli_gateway.FOLDER) == (resolve_gateway.DEFAULT_PORT, resolve_gateway.FOLDER)
    install = (ROOT / "simcluster" / "install.sh").read_text()
    assert re.search(rf'^readonly LITELLM_VERSION="{re.escape(version)}"$', install, re.M)
    from simcluster.runtime import LITELLM_VERSION

    assert version == LITELLM_VERSION


@pytest.mark.parametrize("mount", ["relative/path", "/a:b", "/a,b"])
def test_a_gateway_mount_must_be_absolute_paths(tmp_path: Path, mount: str) -> None:
    folder = _pair(tmp_path)
    result = _compile(folder, "--gateway-mount", mount)
    assert result.exit_code == 2
    assert "give absolute paths, HOST or HOST:CONTAINER" in result.output
