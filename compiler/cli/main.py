"""The command line: a thin face over compiler.pipeline. Only compiler.cli knows click and exit codes.

Exit codes: 0 success; 1 the spec has errors (or --check found differences); 2 usage error, or a
spec or output folder the user must fix (unreadable, not writable, disk full); 3 a bug in sparkc
(it names the command and version); 130 interrupted.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from compiler import __version__
from compiler.cli.gateway import check_gateway_folder, compile_gateway, gateway_options, write_gateway
from compiler.cli.spec_file import (
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SPEC,
    EXIT_USAGE,
    compile_spec,
    echo_json,
    report,
)

if TYPE_CHECKING:  # each command imports what it uses: `sparkc --help` loads click and no more
    from compiler.output.emit import Emitted
    from compiler.pipeline import CompileResult

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


class OutputFolderUnusable(click.ClickException):
    exit_code = EXIT_USAGE


def _formatted(fmt: str) -> None:
    global _json_errors
    _json_errors = fmt == "json"


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


_specs_argument = click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))


@cli.command("compile")
@_specs_argument
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build"),
    show_default=True,
    help="Output folder (several specs: one folder per deployment inside it, named after the deployment).",
)
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 and list the differences if OUT is not what SPEC compiles to."
)
@click.option("--no-cache", is_flag=True, help="Shellcheck every script afresh, not trusting earlier clean results.")
@click.option("--force", is_flag=True, help="Write OUT even where it holds another deployment's compile, replacing it.")
@click.option(
    "--target",
    type=click.Choice(["ssh", "kubernetes", "kubernetes-lws", "slurm"]),
    default="ssh",
    show_default=True,
    help="ssh: scripts that run the containers over ssh and docker; kubernetes: manifests in OUT/kubernetes/ "
    "(a StatefulSet per node); kubernetes-lws: one LeaderWorkerSet in OUT/kubernetes/; "
    "slurm: a batch script in OUT/slurm/ that runs them in one job.",
)
@gateway_options
@_strict_option
@_format_option
@_profiles_option
def compile_command(
    specs: tuple[Path, ...],
    out_dir: Path,
    check: bool,
    no_cache: bool,
    force: bool,
    target: str,
    gateway_port: int | None,
    gateway_image: str,
    gateway_mounts: tuple[tuple[str, str], ...],
    no_gateway: bool,
    strict: bool,
    fmt: str,
    profiles_dir: Path | None,
) -> None:
    """Validate SPEC and write launch-cluster.sh, its companions, lib/ and manifest.json into OUT
    (--target kubernetes or kubernetes-lws: Kubernetes manifests in OUT/kubernetes/ and manifest.json;
    --target slurm: a Slurm batch script in OUT/slurm/ and manifest.json).

    Several SPECs are deployments meant to run side by side on one cluster: they are checked together (names,
    ports, memory on the nodes they share) and each is written to OUT/NAME/, or nothing is written. With the ssh
    target they also get a gateway in OUT/gateway/: one OpenAI-compatible address (LiteLLM's proxy on the first
    deployment's head) that sends each request to the deployment serving its model."""
    from compiler.output.emit import OutputFolderError
    from compiler.output.folder_guard import check_inside

    _formatted(fmt)
    # --check lints nothing: it writes nothing, and files in OUT equal to these were linted by the
    # compile that wrote them.
    results = _compile_together(specs, strict, profiles_dir, lint=not check, lint_cache=not no_cache, target=target)
    together = len(specs) > 1
    results, gateway = compile_gateway(
        results,
        gateway_port,
        gateway_image,
        wanted=together and target == "ssh" and not no_gateway,
        mounts=gateway_mounts,
        strict=strict,
        lint=not check,
        lint_cache=not no_cache,
    )
    if not all(r.ok and r.plan is not None for r in results):
        _report_all(results, fmt)
        sys.exit(EXIT_SPEC)
    if fmt == "text":
        for result in results:
            if result.diagnostics:
                report(result, fmt)
    documents, differ = [], False
    inputs = _inputs(specs, results, profiles_dir)
    try:
        check_gateway_folder(gateway, out_dir)  # before any deployment is written: all of them, or none
        for spec, result in zip(specs, results, strict=True):
            assert result.plan is not None
            out = out_dir / result.plan.name if together else out_dir
            if together:  # OUT/NAME is a folder sparkc makes: a link there would take the deployment elsewhere
                check_inside(out_dir, f"{result.plan.name}/manifest.json")
            document, ok = _write_or_check(spec, out, check, fmt, result, inputs, force)
            documents.append(document)
            differ = differ or not ok
        gateway_part = write_gateway(gateway, out_dir, check, fmt)
    except OutputFolderError as exc:
        raise OutputFolderUnusable(str(exc)) from None
    differ = differ or not gateway_part.get("gateway", {}).get("up_to_date", True)
    if fmt == "json":
        echo_json({"deployments": documents, **gateway_part} if together else documents[0])
    if differ:
        sys.exit(EXIT_SPEC)


def _compile_together(
    specs: tuple[Path, ...], strict: bool, profiles_dir: Path | None, **options: Any
) -> list[CompileResult]:
    from compiler.pipeline import compile_together

    seen: dict[Path, Path] = {}
    for spec in specs:
        first = seen.setdefault(spec.resolve(), spec)
        if first is not spec:
            raise click.UsageError(f"{spec} is given twice (also as {first})")
    results = [compile_spec(spec, strict, profiles_dir, **options) for spec in specs]
    return compile_together(results, strict) if len(specs) > 1 else results


def _inputs(specs: tuple[Path, ...], results: list[CompileResult], profiles_dir: Path | None) -> tuple[Path, ...]:
    """The files the compile read: the specs, their cluster files and own profiles. No compile deletes
    them, whatever a manifest in OUT says."""
    from compiler.cli.spec_file import profiles_folder

    found = list(specs)
    for spec, result in zip(specs, results, strict=True):
        if result.plan is not None and result.plan.cluster_file:
            # recorded as the spec names it, relative to the spec's folder (an absolute path stays itself)
            found.append(spec.parent / result.plan.cluster_file)
        folder = profiles_folder(spec, profiles_dir)
        if folder is not None and folder.is_dir():
            found += sorted(folder.glob("*.yaml"))
    return tuple(found)


def _report_all(results: list[CompileResult], fmt: str) -> None:
    if fmt == "json" and len(results) > 1:
        echo_json({"deployments": [{"spec": r.document.filename, "diagnostics": _json_report(r)} for r in results]})
        return
    for result in results:
        if result.diagnostics or not result.ok:
            report(result, fmt)


def _json_report(result: CompileResult) -> list[dict[str, object]]:
    from compiler.diagnostics import format_json

    diagnostics: list[dict[str, object]] = json.loads(
        format_json(result.diagnostics, result.document.filename, result.document.data)
    )["diagnostics"]
    return diagnostics


def _write_or_check(
    spec: Path,
    out_dir: Path,
    check: bool,
    fmt: str,
    result: CompileResult,
    inputs: tuple[Path, ...],
    force: bool = False,
) -> tuple[dict[str, object], bool]:
    """Write OUT (or compare it, --check); returns the JSON document and whether OUT was up to date.
    Another deployment's compile in OUT is replaced only with --force."""
    from compiler.output.emit import compare, emit
    from compiler.output.folder_guard import check_same_deployment

    if check:
        from compiler.output.check_report import as_text, explain

        try:
            explained = explain(compare(result.files, out_dir), result.files)
        except OSError as exc:
            raise OutputFolderUnusable(f"{out_dir}: cannot read: {exc.strerror}") from None
        document: dict[str, object] = {
            "diagnostics": _json_report(result),
            "out": str(out_dir),
            "up_to_date": not explained,
            "differences": [e.as_json() for e in explained],
        }
        if fmt == "json":
            return document, not explained
        if explained:
            click.echo(f"{out_dir} is not what {spec} compiles to:\n{as_text(explained)}", err=True)
            click.echo(f"run: sparkc compile {spec} -o {out_dir}", err=True)
        else:
            click.echo(f"{out_dir} is up to date with {spec}")
        return document, not explained
    if not force and result.plan is not None:
        check_same_deployment(out_dir, result.plan.name)
    try:
        done = emit(result.files, out_dir, spare=inputs)
    except OSError as exc:  # a name too long, a file in the way, no permission: the folder, not the spec
        raise OutputFolderUnusable(f"{out_dir}: cannot write: {exc.strerror}; choose another output folder") from None
    written = sorted(result.files)
    document = {"diagnostics": _json_report(result), "out": str(out_dir), "written": written}
    document.update(done.as_json())
    if fmt == "json":
        return document, True
    _tell_written(spec, out_dir, result, done)
    return document, True


def _tell_written(spec: Path, out_dir: Path, result: CompileResult, done: Emitted) -> None:
    """What a compile wrote, what it removed, and what to do next (text output)."""
    from compiler.output.kubernetes import KUSTOMIZATION
    from compiler.output.slurm import FOLDER as SLURM_FOLDER

    kubernetes = KUSTOMIZATION in result.files
    batch = sorted(name for name in result.files if name.startswith(f"{SLURM_FOLDER}/"))
    if kubernetes:
        click.echo(f"compiled {spec} -> {out_dir}/ (kubernetes/, manifest.json)")
    elif batch:
        click.echo(f"compiled {spec} -> {out_dir}/ ({', '.join(batch)}, manifest.json)")
    else:
        scripts = ", ".join(sorted(n for n in result.files if n.endswith(".sh") and "/" not in n))
        click.echo(f"compiled {spec} -> {out_dir}/ ({scripts}, lib/, systemd/, PLAN.md, manifest.json)")
    if done.removed:
        click.echo(f"removed files an earlier compile wrote: {', '.join(done.removed)}")
    if done.kept:
        click.echo(done.kept_warning(out_dir), err=True)
    if kubernetes:
        click.echo(f"next: kubectl apply -k {out_dir}/kubernetes (docs/kubernetes.md says what the cluster needs)")
        return
    if batch:
        click.echo(f"next: sbatch {out_dir}/{batch[0]} (docs/slurm.md says what the cluster needs)")
        return
    # A built image (container.build) exists nowhere yet: it is built on the head and copied on first.
    first = (
        f"{out_dir}/build-image.sh, then {out_dir}/distribute.sh, then " if result.plan and result.plan.build else ""
    )
    click.echo(
        f"next: copy {out_dir}/ to the head node ({result.plan.head if result.plan else '?'}) "
        f"and run {first}{out_dir}/launch-cluster.sh (try --dry-run first)"
    )


@cli.command("validate")
@_specs_argument
@_strict_option
@_format_option
@_profiles_option
def validate_command(specs: tuple[Path, ...], strict: bool, fmt: str, profiles_dir: Path | None) -> None:
    """Check SPEC (schema and cross-field rules) without writing anything; several SPECs also beside each other."""
    _formatted(fmt)
    results = _compile_together(specs, strict, profiles_dir, render_files=False)
    if len(results) > 1:
        _report_all(results, fmt)
    else:
        report(results[0], fmt)
    if not all(r.ok for r in results):
        sys.exit(EXIT_SPEC)
    if fmt == "text":
        for spec in specs:
            click.echo(f"{spec}: valid")


@cli.command("explain")
@_spec_argument
@_format_option
@_profiles_option
def explain_command(spec: Path, fmt: str, profiles_dir: Path | None) -> None:
    """Show each resolved setting per node with where it came from, and what runs where (each node's command)."""
    _formatted(fmt)
    result = compile_spec(spec, False, profiles_dir, render_files=False)
    if not result.ok or result.plan is None:
        report(result, fmt)
        sys.exit(EXIT_SPEC)
    from compiler.output.explain_view import explain_json, explain_text

    if fmt == "json":
        click.echo(json.dumps(explain_json(result.plan), indent=2, sort_keys=True))
        return
    report(result, "text")
    click.echo(explain_text(result.plan))


@cli.command("schema")
def schema_command() -> None:
    """Print the spec's JSON schema (for editors and CI)."""
    from compiler.spec.schema import editor_schema

    click.echo(json.dumps(editor_schema(), indent=2))


def _error_json(kind: str, message: str, code: int) -> None:
    """An error under --format json: one document on stdout, as the command's results would be."""
    echo_json({"diagnostics": [], "error": {"kind": kind, "message": message, "exit_code": code}})


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
        _report_bug(exc, sys.argv[1:] if argv is None else argv)
        return EXIT_BUG
    return EXIT_OK


def _report_bug(exc: Exception, argv: list[str]) -> None:
    """A bug in sparkc: the command, the version and the error in one paragraph; the traceback on request."""
    message = f"sparkc {__version__} hit a bug: {type(exc).__name__}: {exc}"
    if _json_errors:
        _error_json("bug", message, EXIT_BUG)
    click.echo(f"{message}\n  command: {shlex.join(['sparkc', *argv])}", err=True)
    if os.environ.get("SPARKC_DEBUG"):
        traceback.print_exc()
    else:
        click.echo("  set SPARKC_DEBUG=1 and run it again for the traceback", err=True)
    if url := _issues_url():
        click.echo(f"  please report it at {url} with the command, the spec and the traceback", err=True)


def _issues_url() -> str | None:
    """Where the installed package's metadata says bugs go (a `[project.urls]` entry), if it names one."""
    try:  # a bug report must not end in a second bug: no metadata, no address
        from importlib import metadata

        entries = metadata.metadata("sparkc").get_all("Project-URL") or []
    except (ImportError, OSError, ValueError):  # PackageNotFoundError is an ImportError
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower().replace(" ", "") in {"issues", "bugtracker", "bugs", "tracker"}:
            return str(url).strip()
    return None


def _register_setup_commands() -> None:
    from compiler.cli.bench_command import COMMANDS as DAY_TWO
    from compiler.cli.setup_commands import COMMANDS  # the setup-day commands live apart; cli imports nothing back

    for command in COMMANDS + DAY_TWO:
        cli.add_command(command)


_register_setup_commands()
