"""How long one compile takes, per example, and how much of it is shellcheck.

    python benchmarks/compile_speed.py [ROUNDS]

Prints min and median seconds per stage; rerun after template or resolver changes.
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial
from pathlib import Path

from compiler.lint import lint_scripts
from compiler.pipeline import compile_text
from compiler.render import render

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def timed(fn, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def main(rounds: int) -> None:
    print(f"{'example':<40} {'stage':<26} {'min s':>8} {'median s':>9}")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        text = path.read_text()
        name = str(path.relative_to(EXAMPLES.parent))
        plan = compile_text(text, name, render_files=False).plan
        assert plan is not None
        files = render(plan)
        stages = {
            "load+validate+resolve": partial(compile_text, text, name, render_files=False),
            "render": partial(render, plan),
            "shellcheck + bash -n": partial(lint_scripts, files),
            "whole compile": partial(compile_text, text, name),
        }
        for stage, fn in stages.items():
            samples = timed(fn, rounds)
            print(f"{path.stem:<40} {stage:<26} {min(samples):>8.4f} {statistics.median(samples):>9.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
