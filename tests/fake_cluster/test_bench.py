"""bench.sh: the engine's own serving benchmark in the deployment's image, against the live endpoint of
the fake cluster (the fake docker runs the benchmark's requests against the stand-in engine, as the real
ones do), one JSON per concurrency and a summary naming the spec's sha256 and the image ID."""

from __future__ import annotations

import json

from tests.fakes.cluster import FakeCluster
from tests.specs import flag_value, with_changes

SOLO = "solo-qwen3-32b.yaml"


def launched(fake: FakeCluster, name: str, changes: dict[str, object] | None = None, **env: str) -> None:
    spec = fake.adapt(name)
    fake.compile(with_changes(spec, changes or {}))
    launch = fake.run("launch-cluster.sh", "--no-probe", env=env)
    assert launch.returncode == 0, launch.stdout + launch.stderr


def test_vllm_bench_at_each_concurrency_with_a_summary(fake: FakeCluster) -> None:
    launched(fake, SOLO)
    out = fake.build / "results"
    bench = fake.run("bench.sh", "--concurrency", "1,4", "--prompts", "4", "--out", str(out))
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "[1/2] concurrency 1: 4 prompts" in bench.stdout and "[2/2] concurrency 4 done" in bench.stdout
    runs = [argv for _, argv in fake.docker_calls() if argv[:2] == ["run", "--rm"] and "bench" in argv]
    assert [flag_value(argv, "--max-concurrency") for argv in runs] == ["1", "4"]
    assert runs[0][runs[0].index("--entrypoint") + 1 :][:4] == ["vllm", "vllm/vllm-openai:v0.11.2", "bench", "serve"]
    assert flag_value(runs[0], "--dataset-name") == "random" and flag_value(runs[0], "--random-input-len") == "512"
    for level in (1, 4):
        assert json.loads((out / f"concurrency-{level}.json").read_text())["completed"] == 4
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((fake.build / "manifest.json").read_text())
    assert summary["spec_sha256"] == manifest["spec"]["sha256"] and summary["image_id"] == "sha256:" + "a" * 64
    assert [r["concurrency"] for r in summary["runs"]] == [1, 4] and all(
        r["output_throughput"] for r in summary["runs"]
    )
    table = (out / "summary.md").read_text()
    assert "| concurrency | output tok/s | requests/s | TTFT median ms |" in table
    assert "output tok/s" in bench.stdout and "ITL p99 ms" in bench.stdout


def test_the_api_key_goes_by_name_and_without_it_bench_refuses(fake: FakeCluster) -> None:
    key = "sk-bench-sample"
    launched(fake, "solo-qwen3-32b-api-key.yaml", {"container.secrets": ["VLLM_API_KEY"]}, VLLM_API_KEY=key)
    missing = fake.run("bench.sh", "--concurrency", "1")
    assert missing.returncode == 2 and "export VLLM_API_KEY where bench.sh runs" in missing.stderr
    bench = fake.run("bench.sh", "--concurrency", "1", "--prompts", "2", env={"VLLM_API_KEY": key})
    assert bench.returncode == 0, bench.stdout + bench.stderr  # the stand-in answers 401 without the key
    assert not any(key in word for _, argv in fake.docker_calls() for word in argv)


def test_sglang_runs_its_own_benchmark(fake: FakeCluster) -> None:
    launched(fake, "sglang-qwen3-30b-2spark.yaml")
    out = fake.build / "results"
    bench = fake.run("bench.sh", "--concurrency", "2", "--prompts", "2", "--out", str(out))
    assert bench.returncode == 0, bench.stdout + bench.stderr
    run = next(argv for _, argv in fake.docker_calls() if argv[:2] == ["run", "--rm"] and "--num-prompts" in argv)
    assert run[run.index("--entrypoint") + 1] == "python3" and "sglang.bench_serving" in run
    assert json.loads((out / "concurrency-2.json").read_text().splitlines()[-1])["completed"] == 2


def test_a_run_past_its_timeout_is_stopped_and_named(fake: FakeCluster) -> None:
    launched(fake, SOLO)
    fake.set("bench-hangs")
    bench = fake.run("bench.sh", "--concurrency", "1", "--timeout", "2", timeout=60)
    assert bench.returncode == 1
    assert "concurrency 1: stopped after 2s (--timeout)" in bench.stderr


def test_bad_options_are_usage_errors_before_anything_runs(fake: FakeCluster) -> None:
    fake.prepare(SOLO)
    for args in (["--concurrency", "0"], ["--concurrency", "1,,4"], ["--prompts", "x"], ["--bogus"]):
        result = fake.run("bench.sh", *args)
        assert result.returncode == 2, args
    assert not fake.docker_calls()
