"""The command line: a thin face over compiler.pipeline. The only module that knows click and exit codes.

Exit codes: 0 success; 1 the spec has errors (or --check found differences); 2 usage error, or a
spec or output folder the user must fix (unreadable, not writable, disk full); 3 a bug in sparkc
(please report it); 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

import click

from compiler import __version__
from compiler.diagnostics import Severity, format_json, format_text
from compiler.emit import OutputFolderError, differences, emit
from compiler.loader import SpecReadError, read_spec
from compiler.pipeline import CompileResult, compile_text
from compiler.plan import Plan
from compiler.schema import load_schema

EXIT_OK, EXIT_SPEC, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
ISSUES_URL = "https://github.com/sparkc/sparkc/issues"

_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How diagnostics are printed.",
)
_strict_option = click.option("--strict", is_flag=True, help="Treat warnings as errors.")
_spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))


class SpecUnreadable(click.ClickException):
    exit_code = EXIT_USAGE


class OutputFolderUnusable(click.ClickException):
    exit_code = EXIT_USAGE


def _compile(spec: Path, strict: bool, render_files: bool = True) -> CompileResult:
    try:
        text = read_spec(spec)
    except SpecReadError as exc:
        raise SpecUnreadable(str(exc)) from None
    return compile_text(text, str(spec), render_files=render_files, strict=strict)


def _report(result: CompileResult, fmt: str) -> None:
    document = result.document.data
    if fmt == "json":
        click.echo(format_json(result.diagnostics, result.document.filename, document))
    elif result.diagnostics:
        click.echo(format_text(result.diagnostics, result.document.filename, document), err=True)
    if fmt == "text" and not result.ok:
        errors = sum(d.severity is Severity.ERROR for d in result.diagnostics)
        click.echo(f"{errors} error{'s' if errors != 1 else ''} in {result.document.filename}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sparkc")
def cli() -> None:
    """Compile one YAML spec into launch scripts for a small multi-node GPU cluster.

    Exit codes: 0 success, 1 spec errors (or --check differences), 2 usage, 3 bug in sparkc.
    """


@cli.command("compile")
@_spec_argument
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build"),
    show_default=True,
    help="Output folder.",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if OUT is not what SPEC compiles to.")
@_strict_option
@_format_option
def compile_command(spec: Path, out_dir: Path, check: bool, strict: bool, fmt: str) -> None:
    """Validate SPEC and write launch-cluster.sh, its companions and manifest.json into OUT."""
    result = _compile(spec, strict)
    _report(result, fmt)
    if not result.ok:
        sys.exit(EXIT_SPEC)
    try:
        _write_or_check(spec, out_dir, check, fmt, result)
    except OutputFolderError as exc:
        raise OutputFolderUnusable(str(exc)) from None


def _write_or_check(spec: Path, out_dir: Path, check: bool, fmt: str, result: CompileResult) -> None:
    if check:
        try:
            changed = differences(result.files, out_dir)
        except OSError as exc:
            raise OutputFolderUnusable(f"{out_dir}: cannot read: {exc.strerror}") from None
        if changed:
            click.echo(
                f"{out_dir} is not what {spec} compiles to: {', '.join(changed)}; "
                f"run: sparkc compile {spec} -o {out_dir}",
                err=True,
            )
            sys.exit(EXIT_SPEC)
        if fmt == "text":
            click.echo(f"{out_dir} is up to date with {spec}")
        return
    try:
        stale = emit(result.files, out_dir)
    except OSError as exc:  # a name too long, a file in the way, no permission: the folder, not the spec
        raise OutputFolderUnusable(f"{out_dir}: cannot write: {exc.strerror}; choose another output folder") from None
    if fmt == "text":
        scripts = ", ".join(sorted(n for n in result.files if n.endswith(".sh")))
        click.echo(f"compiled {spec} -> {out_dir}/ ({scripts}, manifest.json)")
        if stale:
            click.echo(f"removed files an earlier compile wrote: {', '.join(stale)}")
        click.echo(
            f"next: copy {out_dir}/ to the head node ({result.plan.head if result.plan else '?'}) "
            f"and run {out_dir}/launch-cluster.sh (try --dry-run first)"
        )


@cli.command("validate")
@_spec_argument
@_strict_option
@_format_option
def validate_command(spec: Path, strict: bool, fmt: str) -> None:
    """Check SPEC (schema and cross-field rules) without writing anything."""
    result = _compile(spec, strict, render_files=False)
    _report(result, fmt)
    if not result.ok:
        sys.exit(EXIT_SPEC)
    if fmt == "text":
        click.echo(f"{spec}: valid")


@cli.command("explain")
@_spec_argument
@_format_option
def explain_command(spec: Path, fmt: str) -> None:
    """Show every resolved setting, per node, and where it came from (spec, default, profile, derived)."""
    result = _compile(spec, strict=False, render_files=False)
    if not result.ok or result.plan is None:
        _report(result, "text")
        sys.exit(EXIT_SPEC)
    if fmt == "json":
        click.echo(json.dumps(asdict(result.plan), indent=2, sort_keys=True))
        return
    _report(result, "text")
    click.echo(explain_text(result.plan))


def explain_text(plan: Plan) -> str:
    lines = [
        f"deployment {plan.name}: {plan.engine_kind}, {plan.backend} backend, {len(plan.nodes)} node(s), "
        f"head {plan.head}",
        f"image {plan.image} (profile {plan.profile or 'none'}), entrypoint {plan.entrypoint_mode}",
        "",
        "settings:",
    ]
    for s in plan.settings:
        lines.append(f"  {s.name:<28} {s.value:<28} {s.source:<8} {s.why}".rstrip())
    lines += ["", "requested -> effective:"]
    for e in plan.effective:
        mark = "" if not e.differs else f"   DIFFERS: {e.reason}"
        lines.append(f"  {e.setting:<28} {e.requested or '(unset)'} -> {e.effective or '(engine default)'}{mark}")
    lines += ["", "profile and quirks:"] + [f"  - {q}" for q in plan.quirks]
    for node in plan.nodes:
        lines += [
            "",
            f"node {node.name} ({node.role}, rank {node.rank}, {node.ssh_target or 'local on the head'}, "
            f"container {node.container_name}):",
        ]
        for s in node.env:
            lines.append(f"  {s.name:<32} {s.value:<28} {s.source:<8} {s.why}".rstrip())
    return "\n".join(lines)


@cli.command("schema")
def schema_command() -> None:
    """Print the spec's JSON schema (for editors and CI)."""
    click.echo(json.dumps(load_schema(), indent=2))


@cli.command("import")
@click.argument("recipe", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), help="Spec file to write.")
def import_command(recipe: Path, out_file: Path | None) -> None:
    """Turn a spark-vllm-docker or sparkrun RECIPE into a spec; what does not map is listed as warnings."""
    from compiler.importer import RecipeError, import_recipe

    try:
        imported = import_recipe(read_spec(recipe), str(recipe))
    except (SpecReadError, RecipeError) as exc:
        raise SpecUnreadable(str(exc)) from None
    for warning in imported.warnings:
        click.echo(f"{recipe}: warning: {warning}", err=True)
    if out_file is None:
        click.echo(imported.spec_text, nl=False)
        return
    try:
        out_file.write_text(imported.spec_text, encoding="utf-8")
    except OSError as exc:
        raise OutputFolderUnusable(f"{out_file}: cannot write: {exc.strerror}") from None
    click.echo(f"wrote {out_file}; replace every PLACEHOLDER, then: sparkc validate {out_file}", err=True)


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="sparkc", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code if exc.exit_code != 1 else EXIT_USAGE
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_SPEC
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug in sparkc: one clear paragraph, the traceback only on request
        click.echo(f"sparkc {__version__} hit a bug: {type(exc).__name__}: {exc}", err=True)
        click.echo(f"Please report it at {ISSUES_URL} with the spec and this message.", err=True)
        if os.environ.get("SPARKC_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("(set SPARKC_DEBUG=1 to see the traceback)", err=True)
        return EXIT_BUG
    return EXIT_OK
