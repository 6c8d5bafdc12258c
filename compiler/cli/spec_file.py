"""A spec file named on the command line: read, compiled with what lies beside it (the operator's own
image profiles, a hooks patch folder), and its diagnostics reported. Shared by the compile commands
(compiler.cli.main) and the setup-day ones (compiler.cli.setup_commands), which import nothing of each other.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # imported where used: `sparkc --help` loads click and no more
    from compiler.pipeline import CompileResult
    from compiler.spec.profiles import Profile

EXIT_OK, EXIT_SPEC, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class SpecUnreadable(click.ClickException):
    exit_code = EXIT_USAGE


def echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))


def recorded_name(spec: Path) -> str:
    """How the generated files name the spec: the name of the file itself (a symlink followed), so that
    any spelling of its path, from any folder, compiles to the same bytes."""
    try:
        return Path(os.path.realpath(spec)).name or spec.name
    except (OSError, ValueError):
        return spec.name


def compile_spec(
    spec: Path,
    strict: bool,
    profiles_dir: Path | None,
    render_files: bool = True,
    lint: bool = True,
    lint_cache: bool = True,
    target: str = "ssh",
) -> CompileResult:
    from compiler.pipeline import Beside, Target, compile_text
    from compiler.spec.load import SpecReadError, read_spec

    try:
        text = read_spec(spec)
    except SpecReadError as exc:
        raise SpecUnreadable(str(exc)) from None
    beside = Beside(own_profiles(spec, profiles_dir), spec.parent)
    record_as = recorded_name(spec)
    return compile_text(
        text,
        str(spec),
        render_files=render_files,
        strict=strict,
        lint=lint,
        lint_cache=lint_cache,
        record_as=record_as,
        beside=beside,
        target=Target(target),
    )


def profiles_folder(spec: Path, profiles_dir: Path | None) -> Path | None:
    """The operator's own profiles folder for this compile: --profiles, or profiles/ beside the spec."""
    from compiler.resources import data_dir

    folder = profiles_dir or spec.parent / "profiles"
    # A spec at the top of a sparkc checkout sits beside the built-in profiles: not its own.
    builtin = profiles_dir is None and (not folder.is_dir() or folder.resolve() == data_dir("profiles").resolve())
    return None if builtin else folder


def own_profiles(spec: Path, profiles_dir: Path | None) -> tuple[Profile, ...]:
    from compiler.spec.profiles import UserProfileError, load_user_profiles

    folder = profiles_folder(spec, profiles_dir)
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


def report(result: CompileResult, fmt: str, extra: dict[str, Any] | None = None) -> None:
    from compiler.diagnostics import Severity, format_json, format_text

    document = result.document.data
    if fmt == "json":
        items = json.loads(format_json(result.diagnostics, result.document.filename, document))
        echo_json({**items, **(extra or {})})
    elif result.diagnostics:
        click.echo(format_text(result.diagnostics, result.document.filename, document), err=True)
    if fmt == "text" and not result.ok:
        errors = sum(d.severity is Severity.ERROR for d in result.diagnostics)
        click.echo(f"{errors} error{'s' if errors != 1 else ''} in {result.document.filename}", err=True)
