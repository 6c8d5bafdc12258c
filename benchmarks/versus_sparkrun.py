"""sparkc against sparkrun 0.4.x, side by side: whole processes, alternating run by run, on this machine.

    python benchmarks/versus_sparkrun.py [--runs N] [--python PYTHON3.12] [--venv FOLDER] [--out FILE]

sparkrun is installed from the package index into this benchmark's own Python 3.12 virtual environment
(benchmarks/.venv-sparkrun unless --venv; made on the first run). It plans the deployment of the seed
example (the same image, model, 2 nodes, Ray, tensor parallel 2, port, context length and memory share),
written as a sparkrun recipe; its ssh, scp, rsync and docker are recording stubs that answer nothing and
succeed, so nothing leaves the machine, and it runs with --offline --no-auto-detect (no Hugging Face
lookups: without a network each would wait for its timeout). HOME is an empty temporary folder for it.

Pairs (each run: sparkrun's command, then sparkc's, then the next pair):
- `sparkrun run RECIPE --dry-run` against `sparkc compile SEED -o OUT` (sparkc installed from this checkout
  into a fresh virtual environment), three ways: the same spec compiled again (a user's repeated compile:
  its scripts are known clean, shellcheck is skipped), the spec with one value changed each run (the edit
  loop: the launch script is checked again), and an empty cache folder each run (every script checked);
- `sparkrun --help` against `sparkc --help`, and against `sparkc validate SEED` (warm cache).

Writes benchmarks/results/versus_sparkrun.json (medians, p90, ratios against the goals) and prints a table.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_speed import SEED, Tree, summary

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "versus_sparkrun.json"
SPARKRUN = "sparkrun>=0.4,<0.5"

# The seed example's deployment, in sparkrun's recipe format (recipe_version 4).
RECIPE = """\
recipe_version: "4"
name: qwen35-122b
model: Qwen/Qwen3.5-122B-A10B-FP8
runtime: vllm-ray
container: hellohal2064/vllm-qwen3.5-gb10:latest
min_nodes: 2
max_nodes: 2
defaults:
  port: 30000
  host: 0.0.0.0
  tensor_parallel: 2
  gpu_memory_utilization: 0.85
  max_model_len: 4096
command: |
  vllm serve {model} --host {host} --port {port} --tensor-parallel-size {tensor_parallel} \\
    --gpu-memory-utilization {gpu_memory_utilization} --max-model-len {max_model_len} \\
    --trust-remote-code --reasoning-parser qwen3 --distributed-executor-backend ray
"""
HOSTS = "spark-a.local,spark-b.local"  # the seed's nodes

# Records the tool's name and words, reads (and counts) what it was given on stdin, answers nothing.
STUB = """#!/bin/sh
bytes=$(wc -c)
printf '%s %s <%s bytes\\n' "${0##*/}" "$*" "$bytes" >>"$STUB_LOG"
exit 0
"""
STUBBED = ("ssh", "scp", "rsync", "docker")


def find_python(wanted: str | None) -> str:
    """A Python 3.12 for sparkrun's environment (it requires >= 3.12): --python, python3.12 on PATH, or
    pyenv's 3.12 (whose shim answers only when that version is selected)."""
    candidates = [wanted] if wanted else ["python3.12"]
    if not wanted:
        root = (
            subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
            if shutil.which("pyenv")
            else ""
        )
        if root:
            candidates += sorted(str(p) for p in Path(root, "versions").glob("3.12*/bin/python3.12"))
    for candidate in candidates:
        try:
            done = subprocess.run([candidate, "--version"], capture_output=True, text=True)
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.startswith("Python 3.12"):
            return candidate
    raise SystemExit("no Python 3.12 found for sparkrun's environment: pass --python /path/to/python3.12")


def ensure_sparkrun(venv: Path, python: str | None) -> tuple[Path, str]:
    sparkrun = venv / "bin" / "sparkrun"
    if not sparkrun.exists():
        subprocess.run([find_python(python), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", SPARKRUN], check=True)
    version = subprocess.run([str(sparkrun), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return sparkrun, version


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", help="the Python 3.12 to make sparkrun's environment with")
    parser.add_argument("--venv", type=Path, default=ROOT / "benchmarks" / ".venv-sparkrun")
    parser.add_argument("--out", type=Path, default=RESULTS)
    options = parser.parse_args()
    sparkrun, version = ensure_sparkrun(options.venv, options.python)

    with tempfile.TemporaryDirectory(prefix="sparkc-vs-sparkrun-") as tmp:
        scratch = Path(tmp)
        stubs, home = scratch / "bin", scratch / "home"
        stubs.mkdir()
        home.mkdir()
        for name in STUBBED:
            (stubs / name).write_text(STUB, encoding="utf-8")
            (stubs / name).chmod(0o755)
        recipe = scratch / "recipe.yaml"
        recipe.write_text(RECIPE, encoding="utf-8")
        calls = scratch / "calls.log"
        theirs = {
            **os.environ,
            "HOME": str(home),
            "PATH": f"{stubs}:{os.environ['PATH']}",
            "STUB_LOG": str(calls),
            "HF_HUB_OFFLINE": "1",
        }
        ours_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        ours = Tree("sparkc", ROOT, scratch / "sparkc", ours_env)
        ours.scratch.mkdir()
        ours.warm_cache.mkdir()
        ours.install()  # as a user has it: pip install of this checkout into a fresh environment

        def edited_spec() -> list[str]:
            ours.runs += 1
            spec = ours.scratch / "edited.yaml"
            text = (ROOT / SEED).read_text(encoding="utf-8")
            spec.write_text(text.replace("max_model_len: 4096", f"max_model_len: {4096 + ours.runs}"), encoding="utf-8")
            return ["compile", str(spec), "-o", str(ours.scratch / "out-edited")]

        dry_run = [str(sparkrun), "run", str(recipe), "--hosts", HOSTS, "--dry-run", "--offline", "--no-auto-detect"]
        compile_seed = ["compile", SEED, "-o", str(ours.scratch / "out")]
        # name: (sparkrun's argv, sparkc's words, sparkc's cache folder for a run)
        warm: Callable[[], Path] = lambda: ours.warm_cache  # noqa: E731
        pairs: dict[str, tuple[list[str], Callable[[], list[str]], Callable[[], Path]]] = {
            "compile_again_vs_dry_run": (dry_run, lambda: compile_seed, warm),
            "compile_edited_vs_dry_run": (dry_run, edited_spec, warm),
            "compile_cold_vs_dry_run": (dry_run, lambda: compile_seed, ours.cold_cache),
            "help_vs_help": ([str(sparkrun), "--help"], lambda: ["--help"], warm),
            "validate_vs_help": ([str(sparkrun), "--help"], lambda: ["validate", SEED], warm),
        }
        load_before = os.getloadavg()
        results: dict[str, dict[str, object]] = {}
        for name, (their_argv, our_words, cache) in pairs.items():
            timed(their_argv, theirs, scratch)  # untimed first runs: bytecode written, caches filled
            ours.run(our_words(), ours.warm_cache)
            samples: dict[str, list[float]] = {"sparkrun": [], "sparkc": []}
            for _ in range(options.runs):
                samples["sparkrun"].append(timed(their_argv, theirs, scratch))
                samples["sparkc"].append(ours.run(our_words(), cache()))
            row = {tool: summary(values) for tool, values in samples.items()}
            ratio = statistics.median(samples["sparkrun"]) / statistics.median(samples["sparkc"])
            results[name] = {**row, "sparkrun_over_sparkc": round(ratio, 2)}
            print(
                f"{name:<26} sparkrun {row['sparkrun']['median_s']:.3f} s   sparkc {row['sparkc']['median_s']:.3f} s"
                f"   {ratio:.1f}x",
                flush=True,
            )
        load_after = os.getloadavg()
        recorded = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []

    goals = {
        "compile_vs_dry_run": {"goal": ">= 5", "again": results["compile_again_vs_dry_run"]["sparkrun_over_sparkc"]},
        "help_vs_help": {"goal": ">= 5", "ratio": results["help_vs_help"]["sparkrun_over_sparkc"]},
        "validate_vs_help": {"goal": ">= 5", "ratio": results["validate_vs_help"]["sparkrun_over_sparkc"]},
    }
    goals["compile_vs_dry_run"]["edited"] = results["compile_edited_vs_dry_run"]["sparkrun_over_sparkc"]
    goals["compile_vs_dry_run"]["cold_cache"] = results["compile_cold_vs_dry_run"]["sparkrun_over_sparkc"]
    report = {
        "command": "python benchmarks/versus_sparkrun.py " + " ".join(a for a in sys.argv[1:] if "/" not in a),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python_sparkc": platform.python_version(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
        },
        "sparkrun": {
            "version": version,
            "dry_run": "run RECIPE --hosts spark-a.local,spark-b.local --dry-run --offline --no-auto-detect",
            "stubbed": list(STUBBED),
            # What the stubs were asked during one dry run (sparkrun probes the hosts even in a dry run).
            "stub_calls_per_dry_run": round(len(recorded) / max(1, 3 * (options.runs + 1)), 1),
            "stub_calls_sample": sorted({line.split(" <")[0] for line in recorded})[:6],
        },
        "runs": options.runs,
        "results": results,
        "goals": goals,
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(goals, indent=2))
    print(f"written: {options.out}")


if __name__ == "__main__":
    main()
