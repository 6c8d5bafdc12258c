"""Every speculative method (model.draft.method) on each engine: the flags it becomes, what is mounted, and
each combination the engine would refuse, refused at compile time instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler.diagnostics import Severity
from compiler.output.plan_page import plan_page
from tests.fakes.cluster import FakeCluster
from tests.specs import (
    compile_spec,
    container_command,
    docker_run_words,
    example,
    flag_value,
    flag_values,
    with_changes,
)

VLLM, SGLANG, TRTLLM = "solo-qwen3-32b", "sglang-qwen3-30b-2spark", "trtllm-qwen3-235b-2spark-mpi"
DRAFT = {"path": "/srv/draft", "mount": "/models/draft"}


def compiled(base: str, draft: dict[str, Any], **changes: Any) -> Any:
    result = compile_spec(with_changes(example(base), {"model.draft": draft, **changes}))
    assert result.ok and result.plan is not None, [d.message for d in result.diagnostics]
    return result.plan


def errors(base: str, draft: dict[str, Any], **changes: Any) -> list[str]:
    result = compile_spec(with_changes(example(base), {"model.draft": draft, **changes}))
    return [d.message for d in result.diagnostics if d.severity is Severity.ERROR]


def mounts(plan: Any) -> list[str]:
    return flag_values(docker_run_words(plan.nodes[0]), "-v")


@pytest.mark.parametrize(
    ("draft", "config"),
    [
        ({**DRAFT, "num_speculative_tokens": 3}, {"method": "draft_model", "model": "/models/draft"}),
        ({**DRAFT, "method": "eagle3", "num_speculative_tokens": 3}, {"method": "eagle3", "model": "/models/draft"}),
        ({**DRAFT, "method": "dflash", "num_speculative_tokens": 15}, {"method": "dflash", "model": "/models/draft"}),
        ({**DRAFT, "method": "medusa"}, {"method": "medusa", "model": "/models/draft"}),
        ({**DRAFT, "method": "mlp_speculator"}, {"method": "mlp_speculator", "model": "/models/draft"}),
        ({"method": "mtp", "num_speculative_tokens": 1}, {"method": "mtp"}),
        ({**DRAFT, "method": "mtp", "num_speculative_tokens": 1}, {"method": "mtp", "model": "/models/draft"}),
        (
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5},
            {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 5},
        ),
        ({"method": "ngram_gpu", "num_speculative_tokens": 4}, {"method": "ngram_gpu"}),
        ({"method": "suffix"}, {"method": "suffix"}),
    ],
    ids=[
        "draft_model",
        "eagle3",
        "dflash",
        "medusa",
        "mlp_speculator",
        "mtp",
        "mtp+checkpoint",
        "ngram",
        "ngram_gpu",
        "suffix",
    ],
)
def test_vllm_reads_each_method_as_one_speculative_config(draft: dict[str, Any], config: dict[str, Any]) -> None:
    plan = compiled(VLLM, draft)
    argv = container_command(plan, "spark-a")
    tokens = {"num_speculative_tokens": draft["num_speculative_tokens"]} if "num_speculative_tokens" in draft else {}
    assert json.loads(flag_value(argv, "--speculative-config")) == {**config, **tokens}
    drafts = [m for m in mounts(plan) if m.startswith("/srv/draft:")]
    assert drafts == (["/srv/draft:/models/draft:ro"] if "path" in draft else [])
    assert plan.model.draft_folder == draft.get("path", "")  # preflight and distribute.sh check only a real one


def test_sglang_mtp_is_nextn_from_the_model_and_ngram_counts_the_verified_token() -> None:
    argv = container_command(compiled(SGLANG, {"method": "mtp", "num_speculative_tokens": 3}), "spark-b")
    assert flag_value(argv, "--speculative-algorithm") == "NEXTN"
    assert "--speculative-draft-model-path" not in argv
    assert [flag_value(argv, f) for f in ("--speculative-num-steps", "--speculative-eagle-topk")] == ["3", "1"]
    assert flag_value(argv, "--speculative-num-draft-tokens") == "4"
    plan = compiled(SGLANG, {"method": "ngram", "num_speculative_tokens": 7})
    argv = container_command(plan, "spark-b")
    assert flag_value(argv, "--speculative-algorithm") == "NGRAM"
    assert flag_value(argv, "--speculative-num-draft-tokens") == "8"
    assert "--speculative-num-steps" not in argv and "--speculative-eagle-topk" not in argv  # SGLang derives them
    assert not [m for m in mounts(plan) if ":/models/draft" in m]


def test_sglang_without_a_token_count_chooses_its_own() -> None:
    argv = container_command(compiled(SGLANG, {**DRAFT, "method": "eagle"}), "spark-b")
    assert flag_value(argv, "--speculative-algorithm") == "EAGLE"
    assert flag_value(argv, "--speculative-draft-model-path") == "/models/draft"
    assert not any(w.startswith("--speculative-num") for w in argv)


@pytest.mark.parametrize(
    ("base", "draft", "message"),
    [
        (SGLANG, {**DRAFT, "method": "medusa"}, "SGLang has no speculative method medusa; write one it has: "),
        (SGLANG, {"method": "suffix"}, "SGLang has no speculative method suffix"),
        (SGLANG, {"method": "ngram_gpu"}, "SGLang has no speculative method ngram_gpu"),
        (VLLM, {"method": "eagle", "num_speculative_tokens": 2}, "eagle proposes with weights of its own"),
        (SGLANG, {"method": "draft_model"}, "draft_model proposes with weights of its own"),
        (VLLM, {**DRAFT, "method": "ngram", "num_speculative_tokens": 2}, "ngram proposes from the text itself"),
        (VLLM, {**DRAFT, "method": "suffix"}, "suffix proposes from the text itself"),
        (VLLM, {"method": "ngram", "mount": "/models/draft", "num_speculative_tokens": 2}, "mount without path"),
        (VLLM, {**DRAFT, "method": "eagle3"}, "vLLM's eagle3 needs num_speculative_tokens"),
        (VLLM, {"method": "ngram"}, "vLLM's ngram needs num_speculative_tokens"),
        (VLLM, {**DRAFT, "method": "dflash"}, "vLLM's dflash needs num_speculative_tokens"),
        (VLLM, {"method": "dflash", "num_speculative_tokens": 15}, "dflash proposes with weights of its own"),
        (SGLANG, {**DRAFT, "method": "dflash"}, "SGLang's DFLASH counts its draft block in its own way"),
        (TRTLLM, {**DRAFT, "method": "dflash"}, "sparkc writes no TensorRT-LLM speculative_config from model.draft"),
        (VLLM, {"method": "mtp"}, "vLLM's mtp needs num_speculative_tokens"),
        (
            VLLM,
            {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 3},
            "4 is more than prompt_lookup_max 3: vLLM refuses it",
        ),
        (
            SGLANG,
            {"method": "ngram", "prompt_lookup_max": 3},
            "prompt_lookup_max is vLLM's n-gram window (method ngram or ngram_gpu); SGLang's NGRAM has none",
        ),
        (
            VLLM,
            {**DRAFT, "method": "eagle", "num_speculative_tokens": 2, "prompt_lookup_min": 2},
            "prompt_lookup_min is vLLM's n-gram window (method ngram or ngram_gpu); vLLM's eagle has none",
        ),
    ],
)
def test_what_the_engine_would_refuse_is_refused(base: str, draft: dict[str, Any], message: str) -> None:
    found = errors(base, draft)
    assert any(message in m for m in found), found


def test_tensorrt_llm_gets_one_refusal_that_says_where_its_drafts_go() -> None:
    found = errors(TRTLLM, {**DRAFT, "method": "dflash", "num_speculative_tokens": 15})
    assert len(found) == 1 and "engine.llm_api_options.speculative_config" in found[0], found


def test_every_problem_of_the_draft_in_one_run() -> None:
    found = errors(VLLM, {"method": "ngram", "path": "/srv/d", "prompt_lookup_min": 5, "prompt_lookup_max": 2})
    assert len(found) == 3, found  # a path, no token count, the window upside down


def test_the_engines_shorthand_flags_are_refused_beside_model_draft() -> None:
    draft = {"method": "ngram", "num_speculative_tokens": 2}
    for flag in ("--spec-method", "--spec-tokens", "--spec-model", "-sc"):
        found = errors(VLLM, draft, **{"engine.args": [flag, "x"]})
        assert any("use model.draft instead" in m for m in found), (flag, found)
    # Without a draft the shorthand is the engine's to read, on a release that has it (vLLM 0.11.2 does not).
    newer = {"engine.args": ["--spec-method", "ngram"], "container.image": "vllm/vllm-openai:v0.32.0"}
    assert compile_spec(with_changes(example(VLLM), newer)).ok


def model_with(tmp_path: Path, config: dict[str, Any]) -> str:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_mtp_on_a_model_without_mtp_layers_is_refused_where_its_config_is_readable(tmp_path: Path) -> None:
    path = model_with(tmp_path, {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]})
    for base in (VLLM, SGLANG):
        found = errors(base, {"method": "mtp", "num_speculative_tokens": 1}, **{"model.path": path})
        assert any("counts none (num_nextn_predict_layers" in m and path in m for m in found), found
    # A separate MTP checkpoint is the engine's to judge; an unreadable config is not judged at all.
    assert not errors(VLLM, {**DRAFT, "method": "mtp", "num_speculative_tokens": 1}, **{"model.path": path})
    assert not errors(VLLM, {"method": "mtp", "num_speculative_tokens": 1}, **{"model.path": str(tmp_path / "none")})


def test_mtp_tokens_beyond_the_layers_must_be_a_multiple_on_vllm(tmp_path: Path) -> None:
    path = model_with(tmp_path, {"model_type": "glm4_moe", "text_config": {"num_nextn_predict_layers": 2}})
    for tokens, ok in ((1, True), (2, True), (4, True), (3, False)):
        found = errors(VLLM, {"method": "mtp", "num_speculative_tokens": tokens}, **{"model.path": path})
        assert (not found) is ok, (tokens, found)
    assert not errors(SGLANG, {"method": "mtp", "num_speculative_tokens": 3}, **{"model.path": path})
    found = errors(VLLM, {"method": "mtp", "num_speculative_tokens": 3}, **{"model.path": path})
    assert found == [
        f"vLLM reuses the model's 2 MTP layer(s) (as {path}/config.json counts them): num_speculative_tokens 3 must "
        "be at most 2 or a multiple of it"
    ]


def test_explain_and_the_plan_page_say_which_method_runs() -> None:
    plan = compiled(VLLM, {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})
    (row,) = [s for s in plan.settings if s.name == "speculative"]
    assert (row.value, row.source) == ("ngram", "spec")
    assert row.why == (
        "vLLM's ngram: n-grams looked up in the prompt; 4 token(s) per step; n-grams of 3 to 3 token(s); "
        "no draft weights, nothing mounted"
    )
    assert f"Speculative decoding: `{row.why}`." in plan_page(plan)
    plan = compiled(SGLANG, {"method": "mtp"})
    assert plan.model.speculative == (
        "SGLang's NEXTN: the model's own MTP layers; tokens per step: SGLang's default; from the model's own "
        "weights, nothing more mounted"
    )
    plain = compile_spec(example(VLLM)).plan
    assert plain is not None and "speculative" not in {s.name for s in plain.settings}
    assert "Speculative decoding" not in plan_page(plain)


def test_on_the_fakes_ngram_serves_and_a_config_vllm_refuses_fails_the_launch(fake: FakeCluster) -> None:
    fake.prepare("solo-qwen3-32b-ngram.yaml")
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 0 and "READY" in launch.stdout, launch.stdout + launch.stderr
    fake.run("stop-cluster.sh")
    # engine.args are the user's own: an EAGLE config without its head reaches the engine, which refuses it.
    config = '{"method":"eagle","num_speculative_tokens":2}'
    fake.compile(with_changes(fake.adapt("solo-qwen3-32b.yaml"), {"engine.args": ["--speculative-config", config]}))
    launch = fake.run("launch-cluster.sh", "--timeout", "120")
    assert launch.returncode == 1
    assert "num_speculative_tokens was provided but without speculative model" in launch.stderr


def method_notes(image: str, severity: Severity) -> list[str]:
    draft = {**DRAFT, "method": "dflash", "num_speculative_tokens": 15}
    result = compile_spec(with_changes(example(VLLM), {"model.draft": draft, "container.image": image}))
    return [d.message for d in result.diagnostics if d.severity is severity and d.path == ("model", "draft", "method")]


def test_dflash_is_checked_against_the_method_list_of_the_images_vllm_release() -> None:
    assert method_notes("vllm/vllm-openai:v0.26.0", Severity.WARNING) == []  # its --spec-method lists dflash
    (older,) = method_notes("vllm/vllm-openai:v0.20.1", Severity.WARNING)
    assert "cannot tell whether vLLM 0.20.1 has the speculative method dflash" in older
    assert "vLLM 0.20.1's, lists no methods (the flag tables of vLLM 0.26.0, 0.31.0, 0.32.0 list it)" in older
    (untabled,) = method_notes("vllm/vllm-openai:v0.19.0", Severity.WARNING)
    assert "vLLM 0.19.0" in untabled and "compared with, vLLM 0.18.1's" in untabled


def test_a_release_whose_own_table_lacks_dflash_refuses_it_and_a_nearby_one_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The shipped tables that list methods all have dflash: a list without it stands for an older release's.
    monkeypatch.setattr("compiler.resolve.rules.model.listed_methods", lambda table: frozenset({"eagle3"}))
    (refused,) = method_notes("vllm/vllm-openai:v0.26.0", Severity.ERROR)
    assert refused.startswith("vLLM 0.26.0 has no speculative method dflash")
    (warned,) = method_notes("vllm/vllm-openai:v0.27.0", Severity.WARNING)
    assert "vLLM 0.26.0, the flag table sparkc compared vLLM 0.27.0 with, has no speculative method dflash" in warned
