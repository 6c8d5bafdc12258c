"""bench-compare: the summaries bench.sh wrote (summary.json, one per run of it) side by side, with each
run's change against the first, and as a picture (throughput and latency against concurrency).

A summary names the deployment, the spec's sha256 and the image ID, so the comparison says what changed
between the runs; runs with other prompt lengths are not comparable, and it says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from compiler.diagnostics import printable
from compiler.user_files import UnreadableFile, read_json

# The summary's metrics (runtime/bench_summary.py writes them), as the table names them; a higher
# value is better only for the throughputs.
METRICS = (
    ("output tok/s", "output_throughput", "{:.1f}", True),
    ("requests/s", "request_throughput", "{:.2f}", True),
    ("TTFT median ms", "median_ttft_ms", "{:.1f}", False),
    ("TTFT p99 ms", "p99_ttft_ms", "{:.1f}", False),
    ("ITL median ms", "median_itl_ms", "{:.1f}", False),
    ("ITL p99 ms", "p99_itl_ms", "{:.1f}", False),
)
MAX_RUNS = 8
SUMMARY = "summary.json"
MAX_SUMMARY_BYTES = 1 << 20  # bench.sh writes a few KiB
# What bench.sh takes (--concurrency 1 to 9999) and no prompt length reaches: a larger number is no summary of it.
MAX_CONCURRENCY = 9999
MAX_LENGTH = 10**9


class BenchProblem(Exception):
    """A results folder or summary that cannot be read; the message names it and says what to do."""


@dataclass(frozen=True)
class Run:
    label: str  # A, B, ...
    source: str  # the folder or file as given
    deployment: str
    spec_sha256: str
    image_id: str
    input_len: int
    output_len: int
    # concurrency -> metric key -> value (None: that run failed)
    figures: dict[int, dict[str, float | None]]


def read_run(label: str, given: Path) -> Run:
    path = given / SUMMARY if given.is_dir() else given
    if not path.exists():
        raise BenchProblem(
            f"{given}: no {SUMMARY} here; give a folder bench.sh wrote (bench/<time>/ beside the scripts, or its --out)"
        )
    try:
        data = read_json(path, MAX_SUMMARY_BYTES)  # a regular file only: a FIFO or /dev/zero is refused at once
    except UnreadableFile as exc:
        raise BenchProblem(f"{exc}; give the summary.json bench.sh wrote") from None
    return _run(label, given, path, data)


def _run(label: str, given: Path, path: Path, data: object) -> Run:
    def wrong(what: str) -> BenchProblem:
        return BenchProblem(f"{path}: {what}; this is not a summary bench.sh wrote")

    if not isinstance(data, dict):
        raise wrong("not a JSON object")
    deployment, spec, image = (data.get(key) for key in ("deployment", "spec_sha256", "image_id"))
    if not (isinstance(deployment, str) and isinstance(spec, str) and isinstance(image, str)):
        raise wrong("deployment, spec_sha256 or image_id is missing")
    input_len, output_len, runs = data.get("input_len"), data.get("output_len"), data.get("runs")
    if not (_whole(input_len, MAX_LENGTH) and _whole(output_len, MAX_LENGTH) and isinstance(runs, list)):
        raise wrong(f"input_len, output_len (whole numbers up to {MAX_LENGTH}) or runs is missing")
    figures: dict[int, dict[str, float | None]] = {}
    for row in runs:
        level = row.get("concurrency") if isinstance(row, dict) else None
        if not _whole(level, MAX_CONCURRENCY):
            raise wrong(f"a run without its concurrency (a whole number from 1 to {MAX_CONCURRENCY})")
        figures[level] = {key: _figure(row.get(key)) for _, key, _, _ in METRICS}
    return Run(label, str(given), deployment, spec, image, input_len, output_len, figures)


def _whole(value: object, most: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= most


def _figure(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def notes(runs: list[Run]) -> list[str]:
    """What differs between the runs besides the figures: the spec, the image, the prompt lengths."""
    first, lines = runs[0], []
    for run in runs[1:]:
        changed = [
            what
            for what, same in (
                ("another deployment", run.deployment == first.deployment),
                ("another spec", run.spec_sha256 == first.spec_sha256),
                ("another image", run.image_id == first.image_id),
            )
            if not same
        ]
        lines.append(
            f"{run.label} against {first.label}: " + (", ".join(changed) if changed else "the same spec and image")
        )
        if (run.input_len, run.output_len) != (first.input_len, first.output_len):
            lines.append(
                f"warning: {run.label} used {run.input_len} tokens in and {run.output_len} out, {first.label} "
                f"{first.input_len} and {first.output_len}: their figures are not comparable; run bench.sh "
                "again with the same --input-len and --output-len"
            )
    return lines


def table(runs: list[Run]) -> list[list[str]]:
    """One row per metric and concurrency: each run's figure, then each later run's change against the first."""
    levels = sorted({level for run in runs for level in run.figures})
    head = ["metric", "concurrency"] + [run.label for run in runs]
    head += [f"{run.label} vs {runs[0].label}" for run in runs[1:]]
    rows = [head]
    for name, key, fmt, _ in METRICS:
        for level in levels:
            values = [run.figures.get(level, {}).get(key) for run in runs]
            cells = [_cell(run, level, value, fmt) for run, value in zip(runs, values, strict=True)]
            rows.append([name, str(level), *cells, *(_change(values[0], v) for v in values[1:])])
    return rows


def _cell(run: Run, level: int, value: float | None, fmt: str) -> str:
    if level not in run.figures:
        return "-"
    return "failed" if value is None else fmt.format(value)


def _change(first: float | None, value: float | None) -> str:
    if first is None or value is None or first == 0:
        return "-"
    return f"{(value - first) / first * 100:+.1f}%"


def header(runs: list[Run], shown: Callable[[str], str] = printable) -> list[str]:
    """One line per run; `shown` writes each value read from the summary (printable: no byte of it may
    move the terminal's cursor or end the line)."""
    return [
        f"{run.label}: {shown(run.source)}: {shown(run.deployment)}, spec {shown(run.spec_sha256[:12])}, "
        f"image {shown(run.image_id[:19])}, {run.input_len} tokens in, {run.output_len} out"
        for run in runs
    ]


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def markdown(runs: list[Run], rows: list[list[str]]) -> str:
    """The comparison as Markdown. The table holds sparkc's own words and figures; each value read from a
    summary is a code span, where no HTML, link or emphasis is read, on one line."""
    out = ["# Benchmark comparison", ""]
    out += [f"- {line}" for line in header(runs, code_span)]
    out += [f"- {line}" for line in notes(runs)]
    out += ["", "| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(out) + "\n"


def code_span(text: str) -> str:
    """`text` as a Markdown code span: fenced by more backticks than it holds in a row, printable (no line
    break or carriage return), spaced where it starts or ends with a backtick."""
    text = printable(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def as_json(runs: list[Run]) -> dict[str, object]:
    return {
        "runs": [
            {
                "label": run.label,
                "source": run.source,
                "deployment": run.deployment,
                "spec_sha256": run.spec_sha256,
                "image_id": run.image_id,
                "input_len": run.input_len,
                "output_len": run.output_len,
                "figures": {str(level): run.figures[level] for level in sorted(run.figures)},
            }
            for run in runs
        ],
        "notes": notes(runs),
    }


def plot(runs: list[Run], out: Path) -> None:
    """Throughput and latency against concurrency, one line per run (matplotlib, the `plot` extra)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a head node or in CI
    from matplotlib import pyplot

    panels = (("output tok/s", "output_throughput"), ("TTFT median ms", "median_ttft_ms"),
              ("ITL median ms", "median_itl_ms"))  # fmt: skip
    levels = sorted({level for run in runs for level in run.figures})
    figure, axes = pyplot.subplots(1, len(panels), figsize=(12, 3.8), layout="constrained")
    for axis, (name, key) in zip(axes, panels, strict=True):
        for run in runs:
            points = [(level, f[key]) for level, f in sorted(run.figures.items()) if f[key] is not None]
            if points:
                label = _plain_label(f"{run.label}: {run.deployment[:40]}, spec {run.spec_sha256[:8]}")
                axis.plot(*zip(*points, strict=True), marker="o", label=label)
        axis.set_xscale("log", base=2)
        axis.set_xticks(levels, [str(level) for level in levels])
        axis.minorticks_off()
        axis.set_xlabel("concurrency")
        axis.set_title(name)
        axis.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    # No date or version in the file: the same summaries draw the same picture.
    stamp = {"svg": {"Date": None, "Creator": None}, "pdf": {"CreationDate": None, "Creator": None, "Producer": None}}
    matplotlib.rcParams["svg.hashsalt"] = "sparkc"
    figure.savefig(out, metadata=stamp.get(out.suffix.lower().lstrip("."), {"Software": None}))
    pyplot.close(figure)


def _plain_label(text: str) -> str:
    """A legend's text as it reads: matplotlib reads `$...$` as a formula (and stops at a bad one)."""
    return printable(text).replace("$", r"\$")
