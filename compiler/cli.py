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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from compiler import __version__

if TYPE_CHECKING:  # each command imports what it uses: `sparkc --help` loads click and no more
    from compiler.pipeline import CompileResult
    from compiler.profiles import Profile

EXIT_OK, EXIT_SPEC, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
ISSUES_URL = "https://github.com/sparkc/sparkc/issues"

_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How diagnostics, results and errors are printed (json: one document on stdout).",
)
_strict_option = click.option("--strict", is_flag=True, help="Treat warnings as errors.")
_spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
_json_errors = False  # set by a command run with --format json: its errors are printed as JSON too
_profiles_option = click.option(
    "--profiles",
    "profiles_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of your own image profiles (default: profiles/ beside SPEC, if there).",
)


class SpecUnreadable(click.ClickException):
    exit_code = EXIT_USAGE


class OutputFolderUnusable(click.ClickException):
    exit_code = EXIT_USAGE


def _formatted(fmt: str) -> None:
    global _json_errors
    _json_errors = fmt == "json"


def _echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))


def _recorded_name(spec: Path) -> str:
    """How the generated files name the spec: the name of the file itself (a symlink followed), so that
    any spelling of its path, from any folder, compiles to the same bytes."""
    try:
        return Path(os.path.realpath(spec)).name or spec.name
    except (OSError, ValueError):
        return spec.name


def _compile(
    spec: Path,
    strict: bool,
    profiles_dir: Path | None,
    render_files: bool = True,
    lint: bool = True,
    lint_cache: bool = True,
) -> CompileResult:
    from compiler.loader import SpecReadError, read_spec
    from compiler.pipeline import Beside, compile_text

    try:
        text = read_spec(spec)
    except SpecReadError as exc:
        raise SpecUnreadable(str(exc)) from None
    beside = Beside(_own_profiles(spec, profiles_dir), spec.parent)
    record_as = _recorded_name(spec)
    return compile_text(
        text,
        str(spec),
        render_files=render_files,
        strict=strict,
        lint=lint,
        lint_cache=lint_cache,
        record_as=record_as,
        beside=beside,
    )


def _profiles_folder(spec: Path, profiles_dir: Path | None) -> Path | None:
    """The operator's own profiles folder for this compile: --profiles, or profiles/ beside the spec."""
    from compiler.resources import data_dir

    folder = profiles_dir or spec.parent / "profiles"
    # A spec at the top of a sparkc checkout sits beside the built-in profiles: not its own.
    builtin = profiles_dir is None and (not folder.is_dir() or folder.resolve() == data_dir("profiles").resolve())
    return None if builtin else folder


def _own_profiles(spec: Path, profiles_dir: Path | None) -> tuple[Profile, ...]:
    from compiler.profiles import UserProfileError, load_user_profiles

    folder = _profiles_folder(spec, profiles_dir)
    if folder is None:
        return ()
    if not folder.is_dir():
        raise SpecUnreadable(f"{folder}: no such profiles folder")
    try:
        return load_user_profiles(folder)
    except UserProfileError as exc:
        click.echo(str(exc), err=True)
        click.echo(f"the image profiles in {folder} have errors; fix them first", err=True)
        sys.exit(EXIT_SPEC)


def _report(result: CompileResult, fmt: str, extra: dict[str, Any] | None = None) -> None:
    from compiler.diagnostics import Severity, format_json, format_text

    document = result.document.data
    if fmt == "json":
        items = json.loads(format_json(result.diagnostics, result.document.filename, document))
        _echo_json({**items, **(extra or {})})
    elif result.diagnostics:
        click.echo(format_text(result.diagnostics, result.document.filename, document), err=True)
    if fmt == "text" and not result.ok:
        errors = sum(d.severity is Severity.ERROR for d in result.diagnostics)
        click.echo(f"{errors} error{'s' if errors != 1 else ''} in {result.document.filename}", err=True)


class _Interrupted(Exception):
    """Ctrl-C inside a command: past click, which would print a blank line first, to main."""


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # also while a command imports its modules
            raise _Interrupted from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 and list the differences if OUT is not what SPEC compiles to."
)
@click.option("--no-cache", is_flag=True, help="Shellcheck every script afresh, not trusting earlier clean results.")
@_strict_option
@_format_option
@_profiles_option
def compile_command(
    spec: Path, out_dir: Path, check: bool, no_cache: bool, strict: bool, fmt: str, profiles_dir: Path | None
) -> None:
    """Validate SPEC and write launch-cluster.sh, its companions, lib/ and manifest.json into OUT."""
    from compiler.emit import OutputFolderError

    _formatted(fmt)
    # --check lints nothing: it writes nothing, and files in OUT equal to these were linted by the
    # compile that wrote them.
    result = _compile(spec, strict, profiles_dir, lint=not check, lint_cache=not no_cache)
    if not result.ok or result.plan is None:
        _report(result, fmt)
        sys.exit(EXIT_SPEC)
    if fmt == "text" and result.diagnostics:
        _report(result, fmt)
    try:
        _write_or_check(spec, out_dir, check, fmt, result)
    except OutputFolderError as exc:
        raise OutputFolderUnusable(str(exc)) from None


def _json_report(result: CompileResult) -> list[dict[str, object]]:
    from compiler.diagnostics import format_json

    diagnostics: list[dict[str, object]] = json.loads(
        format_json(result.diagnostics, result.document.filename, result.document.data)
    )["diagnostics"]
    return diagnostics


def _write_or_check(spec: Path, out_dir: Path, check: bool, fmt: str, result: CompileResult) -> None:
    from compiler.emit import compare, emit

    if check:
        from compiler.check_report import as_text, explain

        try:
            explained = explain(compare(result.files, out_dir), result.files)
        except OSError as exc:
            raise OutputFolderUnusable(f"{out_dir}: cannot read: {exc.strerror}") from None
        if fmt == "json":
            _echo_json(
                {
                    "diagnostics": _json_report(result),
                    "out": str(out_dir),
                    "up_to_date": not explained,
                    "differences": [e.as_json() for e in explained],
                }
            )
        elif explained:
            click.echo(f"{out_dir} is not what {spec} compiles to:\n{as_text(explained)}", err=True)
            click.echo(f"run: sparkc compile {spec} -o {out_dir}", err=True)
        else:
            click.echo(f"{out_dir} is up to date with {spec}")
        if explained:
            sys.exit(EXIT_SPEC)
        return
    try:
        stale = emit(result.files, out_dir)
    except OSError as exc:  # a name too long, a file in the way, no permission: the folder, not the spec
        raise OutputFolderUnusable(f"{out_dir}: cannot write: {exc.strerror}; choose another output folder") from None
    if fmt == "json":
        written = sorted(result.files)
        _echo_json({"diagnostics": _json_report(result), "out": str(out_dir), "written": written, "removed": stale})
        return
    scripts = ", ".join(sorted(n for n in result.files if n.endswith(".sh") and "/" not in n))
    click.echo(f"compiled {spec} -> {out_dir}/ ({scripts}, lib/, manifest.json)")
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
@_profiles_option
def validate_command(spec: Path, strict: bool, fmt: str, profiles_dir: Path | None) -> None:
    """Check SPEC (schema and cross-field rules) without writing anything."""
    _formatted(fmt)
    result = _compile(spec, strict, profiles_dir, render_files=False)
    _report(result, fmt)
    if not result.ok:
        sys.exit(EXIT_SPEC)
    if fmt == "text":
        click.echo(f"{spec}: valid")


@cli.command("explain")
@_spec_argument
@_format_option
@_profiles_option
def explain_command(spec: Path, fmt: str, profiles_dir: Path | None) -> None:
    """Show every resolved setting, per node, and where it came from (spec, default, profile, derived)."""
    from dataclasses import asdict

    _formatted(fmt)
    result = _compile(spec, False, profiles_dir, render_files=False)
    if not result.ok or result.plan is None:
        _report(result, fmt)
        sys.exit(EXIT_SPEC)
    if fmt == "json":
        click.echo(json.dumps(asdict(result.plan), indent=2, sort_keys=True))
        return
    from compiler.explain_view import explain_text

    _report(result, "text")
    click.echo(explain_text(result.plan))


@cli.command("schema")
def schema_command() -> None:
    """Print the spec's JSON schema (for editors and CI)."""
    from compiler.schema import editor_schema

    click.echo(json.dumps(editor_schema(), indent=2))


def _error_json(kind: str, message: str, code: int) -> None:
    """An error under --format json: one document on stdout, as the command's results would be."""
    _echo_json({"diagnostics": [], "error": {"kind": kind, "message": message, "exit_code": code}})


def main(argv: list[str] | None = None) -> int:
    _formatted("text")
    try:
        cli.main(args=argv, prog_name="sparkc", standalone_mode=False)
    except (click.exceptions.Abort, _Interrupted):
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        code = exc.exit_code if exc.exit_code != 1 else EXIT_USAGE
        if _json_errors:
            _error_json("usage", exc.format_message(), code)
        else:
            exc.show()
        return code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_SPEC
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug in sparkc: one clear paragraph, the traceback only on request
        if _json_errors:
            _error_json("bug", f"sparkc {__version__} hit a bug: {type(exc).__name__}: {exc}", EXIT_BUG)
        click.echo(f"sparkc {__version__} hit a bug: {type(exc).__name__}: {exc}", err=True)
        click.echo(f"Please report it at {ISSUES_URL} with the spec and this message.", err=True)
        if os.environ.get("SPARKC_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("(set SPARKC_DEBUG=1 to see the traceback)", err=True)
        return EXIT_BUG
    return EXIT_OK


def _register_setup_commands() -> None:
    from compiler.cli_setup import COMMANDS  # the setup-day commands live apart; cli imports nothing back

    for command in COMMANDS:
        cli.add_command(command)


_register_setup_commands()
