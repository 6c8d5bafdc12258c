"""sparkc bench summary: the runs of bench.sh (one JSON per concurrency, as vLLM's `bench serve` and SGLang's
bench_serving write them) as a table on the terminal, summary.md and summary.json.

Arguments: DIR DEPLOYMENT SPEC_SHA256 IMAGE_ID INPUT_LEN OUTPUT_LEN CONCURRENCY...
"""

import json
import math
import os
import sys
import tempfile
from pathlib import Path

COLUMNS = (
    ("concurrency", "concurrency", "{:d}"),
    ("output tok/s", "output_throughput", "{:.1f}"),
    ("requests/s", "request_throughput", "{:.2f}"),
    ("TTFT median ms", "median_ttft_ms", "{:.1f}"),
    ("TTFT p99 ms", "p99_ttft_ms", "{:.1f}"),
    ("ITL median ms", "median_itl_ms", "{:.1f}"),
    ("ITL p99 ms", "p99_itl_ms", "{:.1f}"),
)


# A run's result is a few KiB (more with each request's figures); what the benchmark container wrote is read
# no further than this, and JSON it cannot parse (too deep, not an object) is a failed run, not a traceback.
MAX_RESULT_BYTES = 16 << 20


def read(path):
    """The run's result: vLLM writes one JSON document, SGLang appends one JSON line per run (the last counts)."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace") as f:
        text = f.read(MAX_RESULT_BYTES + 1)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(text) > MAX_RESULT_BYTES or not lines:
        return None
    for candidate in ("\n".join(lines), lines[-1]):
        try:
            result = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        return result if isinstance(result, dict) else None
    return None


def number(value):
    """A figure as a float; None for what is not a finite number (10**400 too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def write_anew(path, text):
    """`path` written whole under a fresh name beside it (mkstemp), then renamed over it: never through a
    link planted there, which is refused, as anything but a plain file is."""
    if path.is_symlink() or (os.path.lexists(path) and not path.is_file()):
        sys.exit(f"{path} is a symbolic link or not a plain file, where the summary goes; remove it and run again")
    fd, name = tempfile.mkstemp(prefix="." + path.name + ".", dir=path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        temporary.chmod(0o644)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def main(argv):
    folder, (deployment, spec_sha256, image_id, input_len, output_len) = Path(argv[1]), argv[2:7]
    rows = []
    for level in argv[7:]:
        result = read(folder / f"concurrency-{level}.json")
        row = {"concurrency": int(level), "ok": result is not None}
        for _, key, _ in COLUMNS[1:]:
            row[key] = number((result or {}).get(key))
        rows.append(row)
    summary = {"deployment": deployment, "spec_sha256": spec_sha256, "image_id": image_id,
               "input_len": int(input_len), "output_len": int(output_len), "runs": rows}  # fmt: skip
    write_anew(folder / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    cells = [[h for h, _, _ in COLUMNS]]
    for row in rows:
        cells.append([fmt.format(row[key]) if row.get(key) is not None else "failed" for _, key, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    page = (f"# Benchmark of `{deployment}`\n\nSpec sha256 `{spec_sha256}`, image `{image_id}`; "
            f"random prompts, {input_len} tokens in, {output_len} out.\n\n")  # fmt: skip
    page += "| " + " | ".join(cells[0]) + " |\n| " + " | ".join("---" for _ in COLUMNS) + " |\n"
    page += "".join("| " + " | ".join(r) + " |\n" for r in cells[1:])
    write_anew(folder / "summary.md", page)
    if not all(row["ok"] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
