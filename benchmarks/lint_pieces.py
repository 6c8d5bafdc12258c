"""Does checking a script's values piece by piece catch every broken quoting that the whole values catch?

    python benchmarks/lint_pieces.py [--out FILE]

For each broken quote filter (single quotes around the raw value, none, double quotes), each payload that
breaks out of its quotes, and each field it can sit in, the seed example is compiled with the filter
swapped in, and its scripts are linted twice with no cache: with the values cut into pieces (as sparkc
does) and with the values whole. A case the whole values flag and the pieces do not is a miss. Takes
about ten minutes on two cores; not part of the test run (tests/test_lint_split.py runs a sample).
Writes benchmarks/results/lint_pieces.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler import lint, render  # noqa: E402
from compiler.lint import LintCache, lint_scripts  # noqa: E402
from compiler.pipeline import compile_text  # noqa: E402
from tests.specs import dump, example, with_changes  # noqa: E402

PAYLOADS = [
    "a'; exit 0; '",
    "a'; EVIL=1; '",
    "x' ) ; exit ; ( '",
    "a' $(id) '",
    "a'`id`'",
    "a' \"$NODES\" '",
    "a' $NODES '",
    "a'; echo \"$NODES\"; '",
    "a'; NODES=x; '",
    "a'; unset HEAD; '",
    "a' ${TARGET} '",
    "a'; [ $HEAD = x ] && exit; '",
    "a' \"$TOTAL_GPUS\" '",
    "a'; TARGET=(x); '",
    "a'; echo $PROBE_HOSTT; '",
    "a'; declare -A NODES; '",
    "a'; local x=1; '",
    "a'; return; '",
    "a' # '",
    'a"; exit; "',
    "a'\n exit\n'",
    "a'; readonly HEAD=1; '",
    "a'; cd /; '",
    "a'; for x in 1; do :; done; '",
]
FIELDS = {
    "model.name": lambda p: {"model.name": p},
    "container.env": lambda p: {"container.env": {"GREETING": p}},
    "engine.args": lambda p: {"engine.args": [p]},
}
FILTERS = {"single quotes": "'{}'", "no quotes": "{}", "double quotes": '"{}"'}


def flagged(files: dict[str, str], plan: Any, pieces: bool) -> bool:
    real = lint._checks

    def whole(*args: Any) -> list[lint.Check]:
        return [replace(c, chunks=()) for c in real(*args)]

    lint._checks = real if pieces else whole  # type: ignore[assignment]
    try:
        return bool(lint_scripts(files, LintCache(None), plan=plan))
    finally:
        lint._checks = real  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lint_pieces.json")
    options = parser.parse_args()
    quote = render.quote
    cases, by_whole, misses, refused = 0, 0, [], 0
    for (field, change), payload, (bug, shape) in itertools.product(FIELDS.items(), PAYLOADS, FILTERS.items()):
        render.quote = lambda value, shape=shape: shape.format(value)  # type: ignore[assignment]
        render.environment.cache_clear()
        spec = dump(with_changes(example("seed-qwen35-122b-2spark-ray"), change(payload)))
        result = compile_text(spec, "spec.yaml", lint=False)
        if result.plan is None:
            refused += 1  # the rules refuse the value before any script exists
            continue
        files = render.render(result.plan)
        cases += 1
        whole = flagged(files, result.plan, pieces=False)
        by_whole += whole
        if whole and not flagged(files, result.plan, pieces=True):
            misses.append({"field": field, "payload": payload, "filter": bug})
            print("MISSED", field, repr(payload), bug, flush=True)
    render.quote = quote
    report = {
        "cases": cases,
        "refused_by_the_rules": refused,
        "flagged_by_the_whole_values": by_whole,
        "missed_by_the_pieces": misses,
    }
    options.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
