"""The pre-commit hooks' entry: pre-commit passes every changed spec at once; sparkc takes one a run.

    python -m compiler.cli.precommit validate SPEC...
    python -m compiler.cli.precommit compile-check [-o OUT] SPEC...   (OUT may hold {stem}: build/{stem})

The exit status is the worst of the runs (0 ok, 1 spec errors or stale output, 2 usage, 3 bug).
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = "usage: python -m compiler.cli.precommit validate SPEC... | compile-check [-o OUT] SPEC..."


def run(argv: list[str]) -> int:
    from compiler.cli.main import main

    if not argv or argv[0] not in ("validate", "compile-check"):
        print(USAGE, file=sys.stderr)
        return 2
    action, rest = argv[0], argv[1:]
    out = "build"
    if action == "compile-check" and rest[:1] in (["-o"], ["--out"]):
        if len(rest) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        out, rest = rest[1], rest[2:]
    worst = 0
    for spec in rest:
        if action == "validate":
            code = main(["validate", spec])
        else:
            code = main(["compile", "--check", spec, "-o", out.replace("{stem}", Path(spec).stem)])
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
