"""The stand-in's /metrics: the engine's own names, types and labels, counting the requests it answered, read
back by status.sh's parser (runtime/metrics.sh) as the generated status.sh reads them. On the host, no root."""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from simcluster.tests.test_standin import _post, _serve, model  # noqa: F401  (model: a fixture)
from tests.specs import ROOT

pytestmark = pytest.mark.cluster

PARSE = """
source runtime/common.sh; source runtime/endpoint.sh; source runtime/metrics.sh
SPARKC_METRICS_RUNNING=$1 SPARKC_METRICS_WAITING=$2 SPARKC_METRICS_KV_USAGE=($3)
SPARKC_METRICS_PROMPT_TOKENS=$4 SPARKC_METRICS_GENERATION_TOKENS=$5
metrics_parse
"""
NAMES = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
               "sglang:prompt_tokens_total", "sglang:generation_tokens_total"),
}  # fmt: skip


def _metrics(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def _parsed(engine: str, text: str) -> dict[str, str]:
    done = subprocess.run(
        ["bash", "-c", PARSE, "parse", *NAMES[engine]], cwd=ROOT, input=text, capture_output=True, text=True, check=True
    )
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def _ask(url: str, model_name: str, prompt: str, tokens: int) -> None:
    status, _ = _post(f"{url}/v1/completions", {"model": model_name, "prompt": prompt, "max_tokens": tokens})
    assert status == 200


def test_vllm_counts_its_requests_per_data_parallel_engine(model: Path) -> None:  # noqa: F811
    served = _serve(["vllm", "serve", str(model), "--served-model-name", "tiny", "--max-model-len", "128"], {})
    url = next(served)
    try:
        _, before = _metrics(url)
        assert 'vllm:generation_tokens_total{engine="0",model_name="tiny"} 0.0' in before
        _ask(url, "tiny", "one two three", 5)
        _ask(url, "tiny", "four", 7)
        kind, text = _metrics(url)
        assert kind.startswith("text/plain")
        assert "# TYPE vllm:num_requests_running gauge" in text
        assert "# TYPE vllm:prompt_tokens_total counter" in text
        assert "# TYPE vllm:prompt_tokens_created gauge" in text
        assert _parsed("vllm", text) == {
            "running": "0", "waiting": "0", "prompt": "4", "generation": "12", "engines": "1", "kv": "0.0000"
        }  # fmt: skip
    finally:
        next(served, None)


def test_sglang_serves_metrics_only_under_enable_metrics(model: Path) -> None:  # noqa: F811
    served = _serve(["sglang", "--model-path", str(model), "--served-model-name", "tiny"], {})
    url = next(served)
    try:
        with pytest.raises(urllib.error.HTTPError) as missing:
            _metrics(url)
        assert missing.value.code == 404
    finally:
        next(served, None)
    served = _serve(["sglang", "--model-path", str(model), "--served-model-name", "tiny", "--enable-metrics"], {})
    url = next(served)
    try:
        _ask(url, "tiny", "a b", 3)
        _, text = _metrics(url)
        assert "# TYPE sglang:num_queue_reqs gauge" in text and 'model_name="tiny"' in text
        assert _parsed("sglang", text)["generation"] == "3"
    finally:
        next(served, None)


def test_trtllm_serves_iteration_statistics_as_json(model: Path) -> None:  # noqa: F811
    served = _serve(["trtllm-serve", str(model)], {})
    url = next(served)
    try:
        _ask(url, model.name, "x", 2)
        kind, text = _metrics(url)
        assert kind == "application/json"
        stats = json.loads(text)
        assert len(stats) == 1 and {"iter", "numActiveRequests", "kvCacheStats"} <= set(stats[0])
        assert json.loads(_metrics(url)[1]) == []  # each read takes them
    finally:
        # trtllm-serve's stand-in ends by the signal itself, as the real one does; _serve expects 0.
        with contextlib.suppress(AssertionError):
            next(served, None)
