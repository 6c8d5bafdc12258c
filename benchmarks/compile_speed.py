"""How long sparkc takes, as a user sees it: whole processes, median and p90 over N runs.

    python benchmarks/compile_speed.py [--runs N] [--compare NAME=CHECKOUT ...] [--out FILE] [--stages]

Run it from anywhere; it measures sparkc as a user installs it: each checkout (this one, and each --compare
checkout: another commit, `git worktree add /tmp/base COMMIT`) is installed with pip into a fresh virtual
environment of its own (pip byte-compiles it, setup.py compiles the templates), and its `sparkc` command is
run, alternating the checkouts run by run so that all see the same load; name one of them `baseline` to get
speedups over it. Results go to benchmarks/results/compile_speed.json; a table is printed too. Not part of
the test run.

Scenarios: `--help`; `validate`; `compile` of the seed example with a cold cache (an empty cache folder
each run: shellcheck of the deployment's scripts and the whole pipeline run) and a warm one (the same
folder, filled by an untimed run: clean scripts are not checked again); `compile --check` of an unchanged
output folder, cold and warm; a 2-node and a 64-node spec made from the seed, cold and warm; an
edit-compile loop. The cache folder is chosen with XDG_CACHE_HOME.

The comparison with sparkrun itself is benchmarks/versus_sparkrun.py; the figures here are absolute, and
against other checkouts of sparkc.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout it measures (as `python -m compiler`), also for this helper
from compiler.tools.check_library import spec_with_nodes  # noqa: E402  # the seed with N nodes

SEED = "examples/seed-qwen35-122b-2spark-ray.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "compile_speed.json"


@dataclass
class Tree:
    """A checkout to measure: its `python -m compiler` and its own scratch folders."""

    name: str
    root: Path
    scratch: Path
    env: dict[str, str]
    warm_cache: Path = field(init=False)
    sparkc: Path = field(init=False)
    runs: int = 0

    def __post_init__(self) -> None:
        self.warm_cache = self.scratch / "cache-warm"
        self.sparkc = self.scratch / "venv" / "bin" / "sparkc"

    def install(self) -> None:
        """The checkout as a user gets it: `pip install CHECKOUT` into a fresh virtual environment."""
        venv = self.scratch / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(self.root)], check=True)

    def run(self, args: list[str], cache: Path, expect: int = 0) -> float:
        env = {**self.env, "XDG_CACHE_HOME": str(cache)}
        start = time.perf_counter()
        done = subprocess.run([str(self.sparkc), *args], cwd=self.root, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != expect:
            raise SystemExit(f"{self.name}: sparkc {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return elapsed

    def cold_cache(self) -> Path:
        self.runs += 1
        folder = self.scratch / f"cache-cold-{self.runs}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        return folder


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    args: Callable[[Tree], list[str]]
    cold: bool
    prepare: Callable[[Tree], object] = lambda tree: None


def scenarios(specs: Path) -> list[Scenario]:
    def compile_to(spec: str, out: str) -> Callable[[Tree], list[str]]:
        return lambda tree: ["compile", spec, "-o", str(tree.scratch / out)]

    def check(spec: str, out: str) -> Callable[[Tree], list[str]]:
        return lambda tree: ["compile", spec, "-o", str(tree.scratch / out), "--check"]

    def compiled(spec: str, out: str) -> Callable[[Tree], object]:
        return lambda tree: tree.run(compile_to(spec, out)(tree), tree.warm_cache)

    def edited(tree: Tree) -> list[str]:
        """The same spec file, a new value in it each run: an edit-compile loop."""
        tree.runs += 1
        spec = tree.scratch / "edited.yaml"
        text = (ROOT / SEED).read_text(encoding="utf-8")
        spec.write_text(text.replace("max_model_len: 4096", f"max_model_len: {4096 + tree.runs}"), encoding="utf-8")
        return ["compile", str(spec), "-o", str(tree.scratch / "out-edited")]

    two, many = str(specs / "nodes-2.yaml"), str(specs / "nodes-64.yaml")
    found: list[Scenario] = [
        Scenario("help", "sparkc --help", lambda tree: ["--help"], cold=False),
        Scenario("validate", "sparkc validate SEED", lambda tree: ["validate", SEED], cold=False),
    ]
    for cold in (True, False):
        cache = "cold" if cold else "warm"
        found += [
            Scenario(
                f"compile_seed_{cache}",
                f"sparkc compile SEED -o OUT, {cache} cache",
                compile_to(SEED, "out-seed"),
                cold,
            ),
            Scenario(
                f"check_unchanged_{cache}",
                f"sparkc compile SEED -o OUT --check, OUT up to date, {cache} cache",
                check(SEED, "out-check"),
                cold,
                prepare=compiled(SEED, "out-check"),
            ),
            Scenario(
                f"compile_2_nodes_{cache}",
                f"sparkc compile (2-node spec), {cache} cache",
                compile_to(two, "out-2"),
                cold,
            ),
            Scenario(
                f"compile_64_nodes_{cache}",
                f"sparkc compile (64-node spec), {cache} cache",
                compile_to(many, "out-64"),
                cold,
            ),
        ]
    found.append(
        Scenario(
            "compile_seed_edited",
            "sparkc compile SEED with one value changed each run, cache warm from the unchanged SEED",
            edited,
            cold=False,
            prepare=lambda tree: tree.run(edited(tree), tree.warm_cache),
        )
    )
    return found


def summary(samples: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, max(0, -(-9 * len(ordered) // 10) - 1))]  # nearest rank
    return {
        "median_s": round(statistics.median(ordered), 4),
        "p90_s": round(p90, 4),
        "min_s": round(ordered[0], 4),
        "runs": len(ordered),
    }


def measure(trees: list[Tree], plan: list[Scenario], runs: int) -> dict[str, dict[str, dict[str, object]]]:
    results: dict[str, dict[str, dict[str, object]]] = {tree.name: {} for tree in trees}
    for scenario in plan:
        samples: dict[str, list[float]] = {tree.name: [] for tree in trees}
        for tree in trees:
            scenario.prepare(tree)
            tree.run(scenario.args(tree), tree.warm_cache)  # untimed: bytecode, and the warm cache, filled
        for _ in range(runs):
            for tree in trees:  # alternate, so that both see the same load
                cache = tree.cold_cache() if scenario.cold else tree.warm_cache
                samples[tree.name].append(tree.run(scenario.args(tree), cache))
        for tree in trees:
            results[tree.name][scenario.name] = {"what": scenario.what, **summary(samples[tree.name])}
            row = results[tree.name][scenario.name]
            print(
                f"{tree.name:<9} {scenario.name:<24} median {row['median_s']:.3f} s   p90 {row['p90_s']:.3f} s",
                flush=True,
            )
    return results


def stages(runs: int) -> dict[str, dict[str, float | int]]:
    """In this process, the seed's stages; shellcheck without its cache (what a cold compile pays)."""
    sys.path.insert(0, str(ROOT))
    from compiler.output.lint import LintCache, lint_scripts
    from compiler.output.render import render
    from compiler.pipeline import compile_text

    text = (ROOT / SEED).read_text(encoding="utf-8")
    plan = compile_text(text, SEED, render_files=False).plan
    assert plan is not None
    files = render(plan)
    steps: dict[str, Callable[[], object]] = {
        "load+validate+resolve": lambda: compile_text(text, SEED, render_files=False),
        "render": lambda: render(plan),
        "shellcheck + bash -n (no cache)": lambda: lint_scripts(files, LintCache(None), plan=plan),
    }
    found = {}
    for name, step in steps.items():
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            step()
            samples.append(time.perf_counter() - start)
        found[name] = summary(samples)
    return found


def targets(ours: dict[str, dict[str, object]], baseline: dict[str, dict[str, object]] | None) -> dict[str, object]:
    def median(name: str, of: dict[str, dict[str, object]] = ours) -> float:
        return float(of[name]["median_s"])  # type: ignore[arg-type]

    found: dict[str, object] = {
        "cold_compile_s": {
            "goal": "<= 0.5",
            "seed": median("compile_seed_cold"),
            "2_nodes": median("compile_2_nodes_cold"),
            "64_nodes": median("compile_64_nodes_cold"),
        },
        "check_unchanged_vs_cold_compile": {
            "goal": ">= 10",
            "speedup_warm": round(median("compile_seed_cold") / median("check_unchanged_warm"), 2),
            "speedup_cold": round(median("compile_seed_cold") / median("check_unchanged_cold"), 2),
        },
        "64_nodes_over_2_nodes": {
            "goal": "<= 2",
            "warm": round(median("compile_64_nodes_warm") / median("compile_2_nodes_warm"), 2),
            "cold": round(median("compile_64_nodes_cold") / median("compile_2_nodes_cold"), 2),
        },
        "versus_sparkrun": "see benchmarks/results/versus_sparkrun.json (benchmarks/versus_sparkrun.py)",
    }
    if baseline and baseline is not ours:
        found["speedup_over_baseline_same_session"] = {
            name: round(median(name, baseline) / median(name), 2) for name in ours if name in baseline
        }
    return found


def tool_version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[1]
    except (OSError, IndexError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=CHECKOUT",
        help="another checkout of sparkc, measured alongside (repeatable; `baseline=...` for speedups)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--stages", action="store_true", help="also time the stages in this process")
    parser.add_argument("--only", help="comma-separated scenario names")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="sparkc-bench-") as tmp:
        scratch = Path(tmp)
        specs = scratch / "specs"
        specs.mkdir()
        seed_text = (ROOT / SEED).read_text(encoding="utf-8")
        for count in (2, 64):
            (specs / f"nodes-{count}.yaml").write_text(spec_with_nodes(seed_text, count), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        trees = [Tree("this", ROOT, scratch / "this", env)]
        for item in options.compare:
            name, _, checkout = item.partition("=")
            trees.append(Tree(name, Path(checkout).resolve(), scratch / name, env))
        for tree in trees:
            tree.scratch.mkdir()
            tree.warm_cache.mkdir()
            tree.install()
        plan = scenarios(specs)
        if options.only:
            wanted = set(options.only.split(","))
            plan = [s for s in plan if s.name in wanted]
        load_before = os.getloadavg()
        results = measure(trees, plan, options.runs)
        load_after = os.getloadavg()

    report: dict[str, object] = {
        # Checkouts by name only: no path of this machine in a file meant to be committed.
        "command": "python benchmarks/compile_speed.py "
        + " ".join(re.sub(r"^([^=]+)=.*$", r"\1=CHECKOUT", a) for a in sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
            "shellcheck": tool_version(["shellcheck", "--version"]),
            "installed": "pip install CHECKOUT into a fresh virtual environment (byte-compiled by pip)",
        },
        "results": results["this"],
    }
    report["compared"] = {tree.name: results[tree.name] for tree in trees[1:]}
    if not options.only:
        report["targets"] = {tree.name: targets(results[tree.name], results.get("baseline")) for tree in trees}
    if options.stages:
        report["stages_in_process"] = stages(options.runs)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report.get("targets", {}), indent=2))
    print(f"written: {options.out}")


if __name__ == "__main__":
    main()
