"""Values that passed silently and fail on real Sparks: a port inside a node's ssh host, a direct cable whose
ends sit on different subnets, a max_model_len the engine refuses, an image tag that floats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.diagnostics import Severity
from compiler.pipeline import compile_text
from compiler.resolve.context import derive
from compiler.spec.build import build_spec
from compiler.spec.schema import load_schema, with_defaults
from tests.specs import compile_spec, diagnostics_text, dump, example, with_changes

NATIVE = example("llama33-70b-2spark-native")
SOLO = example("solo-qwen3-32b")


def _found(spec: dict, severity: Severity) -> list[tuple[str, str]]:
    """(the spec's line, message) of each diagnostic of that severity."""
    text = dump(spec)
    result = compile_text(text, "spec.yaml", render_files=False)
    lines = text.splitlines()
    return [(lines[d.line - 1].strip(), d.message) for d in result.diagnostics if d.severity is severity]


def test_a_port_inside_a_nodes_ssh_host_is_refused_with_where_the_port_goes() -> None:
    errors = _found(with_changes(NATIVE, {"cluster.nodes.1.ssh": "spark-b.local:2222"}), Severity.ERROR)
    assert errors == [
        (
            "ssh: spark-b.local:2222",
            "'spark-b.local:2222' puts a port in the host: ssh would look for a host named so; write ssh: "
            "spark-b.local and the port as cluster.ssh.port: 2222 (a port that differs per node goes in the head's "
            "~/.ssh/config, under that node's Host)",
        )
    ]
    assert _found(with_changes(NATIVE, {"cluster.nodes.1.ssh": "fd00::11"}), Severity.ERROR) == []  # IPv6
    errors = _found(with_changes(NATIVE, {"cluster.nodes.1.ssh": "spark:b:22"}), Severity.ERROR)
    assert [m for _, m in errors] == ["'spark:b:22' is not an IPv6 address nor a host name: write the node's address"]


def test_a_direct_cable_between_two_subnets_is_named() -> None:
    apart = with_changes(NATIVE, {"cluster.nodes.1.fabric.ip": "192.168.200.11"})
    warnings = [w for w in _found(apart, Severity.WARNING) if "subnet" in w[1]]
    assert len(warnings) == 1 and warnings[0][0] == "ip: 192.168.200.11", warnings
    assert "spark-b's 192.168.200.11 and spark-a's 192.168.100.10 are on different /24 subnets" in warnings[0][1]
    assert "put both on 192.168.100.0/24" in warnings[0][1] and "write topology: switch" in warnings[0][1]
    switched = with_changes(apart, {"cluster.topology": "switch"})
    assert not [w for w in _found(switched, Severity.WARNING) if "different /24" in w[1]]
    assert not [w for w in _found(NATIVE, Severity.WARNING) if "different /24" in w[1]]


def _with_config(tmp_path: Path, config: dict, changes: dict) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return with_changes(SOLO, {"model.path": str(tmp_path), **changes})


QWEN3_32B = {"max_position_embeddings": 40960, "text_config": None}


def test_a_max_model_len_above_the_models_config_is_refused_as_vllm_does(tmp_path: Path) -> None:
    spec = _with_config(tmp_path, QWEN3_32B, {"engine.max_model_len": 10_000_000})
    result = compile_spec(spec)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert [d.path for d in errors] == [("engine", "max_model_len")], diagnostics_text(result)
    assert errors[0].message == (
        f"10000000 is longer than {tmp_path}/config.json allows (40960 positions, max_position_embeddings and its "
        "RoPE scaling): vLLM refuses it at start unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set; write at most 40960"
    )
    allowed = with_changes(spec, {"container.env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": 1}})
    result = compile_spec(allowed)
    assert result.ok and any(
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN makes vLLM take it" in d.message for d in result.diagnostics
    )
    fits = compile_spec(_with_config(tmp_path, QWEN3_32B, {"engine.max_model_len": 40960}))
    assert fits.ok, diagnostics_text(fits)


def test_rope_scaling_lengthens_what_the_config_allows(tmp_path: Path) -> None:
    yarn = {
        **QWEN3_32B,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    }
    assert compile_spec(_with_config(tmp_path, yarn, {"engine.max_model_len": 131072})).ok
    refused = compile_spec(_with_config(tmp_path, yarn, {"engine.max_model_len": 200_000}))
    assert not refused.ok and "(163840 positions" in diagnostics_text(refused)


def test_sglang_refuses_a_longer_context_unless_its_own_variable_says_so(tmp_path: Path) -> None:
    sglang = {
        "engine.kind": "sglang",
        "container.image": "lmsysorg/sglang:v0.5.23-cu130",
        "engine.max_model_len": 65536,
    }
    result = compile_spec(_with_config(tmp_path, QWEN3_32B, {**sglang, "engine.reasoning_parser": "qwen3"}))
    assert "SGLang refuses it at start unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in diagnostics_text(result)
    allowed = {**sglang, "engine.env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "true"}}
    assert compile_spec(_with_config(tmp_path, QWEN3_32B, allowed)).ok


def test_an_absurd_max_model_len_warns_where_the_config_is_not_readable() -> None:
    result = compile_spec(with_changes(SOLO, {"engine.max_model_len": 10_000_000}))
    (warning,) = [d for d in result.diagnostics if d.path == ("engine", "max_model_len")]
    assert warning.severity is Severity.WARNING and "longer than nearly every model's context" in warning.message
    assert not [d for d in compile_spec(SOLO).diagnostics if d.path == ("engine", "max_model_len")]


def test_the_sglang_example_runs_nvidias_cu130_build_pinned_and_its_release_is_known() -> None:
    spec = example("sglang-qwen3-30b-2spark")
    assert spec["container"]["image"] == "lmsysorg/sglang:v0.5.23-cu130"
    result = compile_spec(spec)
    assert result.ok and result.plan is not None
    assert not [d for d in result.diagnostics if d.path[:2] in (("container", "image"), ("engine", "args"))]
    given = json.loads(json.dumps(spec))
    assert derive(build_spec(with_defaults(given, load_schema()), given)).engine_version == "0.5.23"


@pytest.mark.parametrize("tag", ["latest", "latest-cu130"])
def test_a_floating_tag_warns_as_latest_does(tag: str) -> None:
    result = compile_spec(
        with_changes(example("sglang-qwen3-30b-2spark"), {"container.image": f"lmsysorg/sglang:{tag}"})
    )
    assert any("names no fixed release" in d.message for d in result.diagnostics if d.path == ("container", "image"))
