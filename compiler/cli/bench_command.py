"""`sparkc bench-compare`: bench.sh's summaries side by side, as a table, Markdown, JSON or a picture.

Exit codes as everywhere: 0 ok, 2 a results folder that cannot be read or the picture's extra missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from compiler.cli.setup_commands import UsageProblem


@click.command("bench-compare")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--markdown",
    "markdown_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the comparison as Markdown to this file.",
)
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also draw throughput and latency against concurrency: .png, .svg or .pdf (sparkc[plot]).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def bench_compare_command(
    results: tuple[Path, ...], markdown_out: Path | None, plot_out: Path | None, fmt: str
) -> None:
    """Compare the runs of build/bench.sh: each RESULTS is a folder it wrote (or its summary.json).

    The first run is the base: every later run's change against it is shown per metric and concurrency,
    and what else differs (the deployment, the spec's sha256, the image, the prompt lengths).
    """
    from compiler.diagnostics import printable
    from compiler.tools import bench_compare as bc

    if len(results) > bc.MAX_RUNS:
        raise UsageProblem(f"{len(results)} results given; compare at most {bc.MAX_RUNS} at once")
    if plot_out is not None and plot_out.suffix.lower() not in {".png", ".svg", ".pdf"}:
        raise UsageProblem(f"--plot {plot_out}: name a .png, .svg or .pdf file")
    try:
        runs = [bc.read_run(chr(ord("A") + i), path) for i, path in enumerate(results)]
    except bc.BenchProblem as exc:
        raise UsageProblem(printable(str(exc))) from None
    rows = bc.table(runs)
    if fmt == "json":
        click.echo(json.dumps(bc.as_json(runs), indent=2, sort_keys=True))
    else:
        for line in [*bc.header(runs), *bc.notes(runs), "", *bc.text_table(rows).splitlines()]:
            click.echo(printable(line))
    if markdown_out is not None:
        _write(markdown_out, lambda path: path.write_text(bc.markdown(runs, rows), encoding="utf-8"))
    if plot_out is not None:
        try:
            import matplotlib  # noqa: F401  (the optional extra)
        except ImportError:
            raise UsageProblem("--plot needs matplotlib: pip install 'sparkc[plot]'") from None
        _write(plot_out, lambda path: bc.plot(runs, path))


def _write(path: Path, write: Callable[[Path], object]) -> None:
    try:
        write(path)
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot write: {exc.strerror}") from None
    click.echo(f"wrote {path}", err=True)


COMMANDS = [bench_compare_command]
