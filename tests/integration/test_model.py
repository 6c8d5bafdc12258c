"""The model section: draft model flags per engine, flags it manages, the KV budget, the Hugging Face
cache form, and the compile-time memory fit check."""

from __future__ import annotations

import json
from pathlib import Path

from compiler.diagnostics import Severity
from tests.specs import (
    DELETE,
    compile_spec,
    container_command,
    docker_run_words,
    example,
    flag_value,
    flag_values,
    with_changes,
)

DRAFT = {"path": "/srv/draft", "mount": "/models/draft", "num_speculative_tokens": 3}


def messages(result, severity: Severity = Severity.ERROR) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity is severity]


def test_vllm_draft_is_one_json_config_and_mounted() -> None:
    result = compile_spec(with_changes(example("solo-qwen3-32b"), {"model.draft": DRAFT}))
    assert result.ok and result.plan is not None
    argv = container_command(result.plan, "spark-a")
    config = json.loads(flag_value(argv, "--speculative-config"))
    assert config == {"method": "draft_model", "model": "/models/draft", "num_speculative_tokens": 3}
    assert "/srv/draft:/models/draft:ro" in flag_values(docker_run_words(result.plan.nodes[0]), "-v")


def test_sglang_draft_flags() -> None:
    spec = with_changes(example("sglang-qwen3-30b-2spark"), {"model.draft": {**DRAFT, "method": "eagle3"}})
    result = compile_spec(spec)
    assert result.ok and result.plan is not None
    argv = container_command(result.plan, result.plan.nodes[1].name)
    assert flag_value(argv, "--speculative-algorithm") == "EAGLE3"
    assert flag_value(argv, "--speculative-draft-model-path") == "/models/draft"
    assert (flag_value(argv, "--speculative-num-steps"), flag_value(argv, "--speculative-num-draft-tokens")) == (
        "3",
        "4",
    )


def test_draft_flags_are_managed_only_when_the_draft_is_given() -> None:
    base = example("solo-qwen3-32b")
    args = ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}']
    assert compile_spec(with_changes(base, {"engine.args": args})).ok  # ngram needs no draft: the user's own
    result = compile_spec(with_changes(base, {"engine.args": args, "model.draft": DRAFT}))
    assert any("use model.draft instead" in m for m in messages(result))
    sglang = with_changes(example("sglang-qwen3-30b-2spark"), {"model.draft": DRAFT})
    result = compile_spec(with_changes(sglang, {"engine.args": ["--speculative-draft-model", "/x"]}))
    assert any("(as --speculative-draft-model-path) is set by sparkc" in m for m in messages(result))


def test_draft_over_the_model_is_refused() -> None:
    spec = with_changes(
        example("solo-qwen3-32b"), {"model.draft": {**DRAFT, "mount": "/home/aurora/models/Qwen3-32B/d"}}
    )
    assert any("over or inside the model" in m for m in messages(compile_spec(spec)))


def test_kv_budget_vllm_bytes_and_sglang_refused() -> None:
    result = compile_spec(with_changes(example("solo-qwen3-32b"), {"engine.kv_cache_memory": "20g"}))
    assert result.plan is not None
    assert flag_value(container_command(result.plan, "spark-a"), "--kv-cache-memory-bytes") == str(20 * 1024**3)
    assert any("only sets its start check" in m for m in messages(result, Severity.WARNING))
    sglang = compile_spec(with_changes(example("sglang-qwen3-30b-2spark"), {"engine.kv_cache_memory": "20g"}))
    assert any("SGLang has no absolute KV-cache budget" in m for m in messages(sglang))


def test_hf_cache_needs_repo_and_excludes_path() -> None:
    result = compile_spec(with_changes(example("solo-qwen3-32b"), {"model.hf_cache": "/hf"}))
    assert set(messages(result)) >= {
        "give the weights once: path (a folder) or hf_cache with repo, not both",
        "hf_cache needs repo, the Hugging Face repo id to serve (ORG/NAME)",
    }


def test_fit_check_reads_the_index_and_warns_per_node(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 240 * 10**9}}))
    changes = {"model.path": str(tmp_path), "cluster.nodes.1.memory_gb": 256, "engine.gpu_memory_utilization": DELETE}
    result = compile_spec(with_changes(example("llama33-70b-2spark-native"), changes))
    warnings = [m for m in messages(result, Severity.WARNING) if "cannot hold" in m]
    # 120 GB per rank: spark-a (128 - 10 GB) cannot hold it, spark-b (256 GB) can
    assert len(warnings) == 1 and warnings[0].startswith("spark-a cannot hold this launch: weights of 240.0 GB")
    fits = compile_spec(with_changes(example("llama33-70b-2spark-native"), {"model.size_gb": 141}))
    assert not [m for m in messages(fits, Severity.WARNING) if "cannot hold" in m]
