"""The shape of what sparkc writes, measured: lines every entry script of the seed example repeats, the
longest line of every example's output, and how many lines a one-value change (the API port) moves.

    python benchmarks/house_metrics.py [--json FILE]

Runs the checkout's compiler (`python -m compiler`) from the repository root; no cluster, no network.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed-qwen35-122b-2spark-ray.yaml"
ENTRY = (
    "launch-cluster.sh",
    "stop-cluster.sh",
    "distribute.sh",
    "status.sh",
    "logs.sh",
    "bench.sh",
    "fetch-model.sh",
    "install-service.sh",
)


def compile_to(spec: Path, out: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "compiler", "compile", str(spec), "-o", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def longest_line(folder: Path) -> tuple[int, str]:
    best = (0, "")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            best = max(best, (len(line), str(path.relative_to(folder))))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seed, moved = Path(tmp, "seed"), Path(tmp, "moved")
        compile_to(SEED, seed)
        common = set.intersection(*(set((seed / n).read_text().splitlines()) for n in ENTRY))
        text = SEED.read_text(encoding="utf-8")
        changed = re.sub(r"(\n\s+port:\s*)30000\b", r"\g<1>30123", text, count=1)
        assert changed != text, "the seed example's port line moved: update this benchmark"
        spec = Path(tmp, SEED.name)
        spec.write_text(changed, encoding="utf-8")
        compile_to(spec, moved)
        diff = subprocess.run(
            ["diff", "-r", "-x", "manifest.json", "-x", "lib", str(seed), str(moved)], capture_output=True, text=True
        ).stdout
        port_lines = sum(1 for line in diff.splitlines() if line.startswith(("<", ">")))
        longest = (0, "")
        for example in sorted((ROOT / "examples").glob("*.yaml")):
            out = Path(tmp, "all", example.stem)
            compile_to(example, out)
            length, file = longest_line(out)
            longest = max(longest, (length, f"{example.stem}/{file}"))
    figures = {
        "lines_common_to_the_8_entry_scripts": len(common),
        "longest_generated_line": {"characters": longest[0], "file": longest[1]},
        "port_change_changed_lines_outside_manifest_and_lib": port_lines,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
