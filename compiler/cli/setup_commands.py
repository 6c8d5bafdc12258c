"""The setup-day commands: discover (probe nodes over ssh), init (a starter spec), setup-fabric (a script).

Kept apart from compiler.cli.main, which registers them; exit codes as everywhere: 0 ok, 1 a problem found
(an unreachable host, a spec error), 2 usage or environment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import click


class UsageProblem(click.ClickException):
    exit_code = 2


@click.command("discover")
@click.argument("hosts", nargs=-1, required=True)
@click.option("--ssh-user", help="Login user on the nodes (ssh's own default when absent).")
@click.option("--identity-file", type=click.Path(dir_okay=False), help="Private key for ssh.")
@click.option("--port", type=click.IntRange(1, 65535), default=22, show_default=True, help="ssh port.")
@click.option("--connect-timeout", type=click.IntRange(1, 300), default=10, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def discover_command(
    hosts: tuple[str, ...], ssh_user: str | None, identity_file: str | None, port: int, connect_timeout: int, fmt: str
) -> None:
    """Probe each HOST (its management address) over ssh, read-only, and print a ready `cluster:` section.

    Warnings (on stderr, and as comments in YAML) say what looks wrong; an unreachable host exits 1.
    """
    from compiler.diagnostics import printable
    from compiler.tools import discover as disc  # imported where used: `sparkc --help` stays light

    for host in hosts:
        if not disc.HOST_RE.match(host):
            raise UsageProblem(f"'{host}' is not a host name or an IP address")
    if len(set(hosts)) != len(hosts):
        raise UsageProblem("a host is named twice")
    if ssh_user is not None and not disc.USER_RE.match(ssh_user):
        raise UsageProblem(f"'{ssh_user}' is not a user name")
    ssh = disc.SshSettings(ssh_user, identity_file, port, connect_timeout)
    results = disc.probe_all(list(hosts), ssh)
    reached = [r for r in results.values() if not isinstance(r, str)]
    unreachable = {h: r for h, r in results.items() if isinstance(r, str)}
    choices = disc.choose(reached)
    if choices:
        click.echo(disc.to_yaml(choices, ssh, unreachable) if fmt == "yaml" else disc.to_json(choices, ssh), nl=False)
    for name, text in disc.all_warnings(choices):
        click.echo(printable(f"warning: {name}: {text}"), err=True)
    for host, why in unreachable.items():
        click.echo(printable(f"error: {host} unreachable: {why}"), err=True)
    if unreachable or any(c.netdev is None for c in choices):
        sys.exit(1)


@click.command("init")
@click.option(
    "--nodes", type=click.IntRange(1, 64), help="How many nodes (default 2; with --from-discover, its nodes)."
)
@click.option(
    "--from-discover",
    "from_discover",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file sparkc discover wrote: its nodes, addresses and devices.",
)
@click.option("--name", default="my-model", show_default=True, help="The deployment's name.")
@click.option(
    "-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("spec.yaml"), show_default=True
)
def init_command(nodes: int | None, from_discover: Path | None, name: str, out: Path) -> None:
    """Write a commented starter spec; replace the values marked CHANGE, then it compiles."""
    from compiler.pipeline import compile_text
    from compiler.resolve.rules.cluster import is_placeholder_left
    from compiler.tools import init_spec

    if from_discover is not None:
        try:
            found, settings = init_spec.discovered(from_discover)
        except init_spec.InitProblem as exc:
            raise UsageProblem(str(exc)) from None
        if nodes is not None and nodes != len(found):
            raise UsageProblem(f"--nodes {nodes}, but {from_discover} describes {len(found)} node(s)")
    else:
        found, settings = init_spec.placeholder_nodes(nodes or 2), {}
    text = init_spec.starter(name, found, settings, str(from_discover) if from_discover else "")
    checked = compile_text(text, str(out), render_files=False)
    # Only the placeholders may be wrong (the operator replaces them); a name or a discovered value the
    # spec refuses: say which, write nothing.
    wrong = [d for d in checked.diagnostics if d.severity == "error" and not is_placeholder_left(d)]
    if wrong:
        problems = "; ".join(f"line {d.line}: {d.message}" for d in wrong)
        raise UsageProblem(f"the starter spec would not validate ({problems}); write nothing")
    _write_new(out, text, "init")
    marked = text.count(init_spec.CHANGE)
    click.echo(f"wrote {out}: replace the {marked} value(s) marked CHANGE, then: sparkc compile {out} -o build/")


def _write_new(out: Path, text: str, command: str) -> None:
    """Write a new file `out`: never over an existing file, nor through a link (exclusive create: a name
    that exists, even as a dangling link, is refused)."""
    try:
        with out.open("x", encoding="utf-8") as stream:
            stream.write(text)
    except FileExistsError:
        message = f"{out} exists; sparkc {command} never overwrites a file: choose another name with -o"
        raise UsageProblem(message) from None
    except OSError as exc:
        raise UsageProblem(f"{out}: cannot write: {exc.strerror}") from None


@click.command("setup-fabric")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("build"))
@click.option(
    "--prefix-length",
    type=click.IntRange(8, 30),
    default=None,
    help="Fabric subnet size (default 24; a mesh or ring takes cluster.link_prefix_length).",
)
def setup_fabric_command(spec: Path, out_dir: Path, prefix_length: int | None) -> None:
    """Write OUT/setup-fabric.sh: fabric addresses, MTU 9000 and the head's ssh key, for SPEC's nodes."""
    # The compile command's own reading (own profiles and a patch folder beside the spec) and report.
    from compiler.cli.spec_file import compile_spec, report
    from compiler.output.lint import lint_scripts
    from compiler.pipeline import GeneratedScriptError, with_problems
    from compiler.spec.build import build_spec
    from compiler.spec.load import to_plain
    from compiler.spec.schema import load_schema, with_defaults
    from compiler.tools.setup_fabric import SCRIPT, fabric_plan, render_setup
    from compiler.user_files import InTheWay, replace_file

    result = compile_spec(spec, strict=False, profiles_dir=None, render_files=False)
    if not result.ok or result.plan is None:
        report(result, "text")
        sys.exit(1)
    given = to_plain(result.document.data)
    typed = build_spec(with_defaults(given, load_schema()), given)
    plan, problems = fabric_plan(
        typed, result.plan.topology, result.plan.head, str(spec), result.plan.spec_sha256, prefix_length
    )
    if plan is None:
        report(with_problems(result, problems), "text")
        sys.exit(1)
    script = render_setup(plan)
    findings = lint_scripts({SCRIPT: script})
    if findings:
        raise GeneratedScriptError("\n".join(findings))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        replace_file(out_dir / SCRIPT, script.encode("utf-8"), 0o755)
    except InTheWay as exc:
        raise UsageProblem(str(exc)) from None
    except OSError as exc:
        raise UsageProblem(f"{out_dir}: cannot write: {exc.strerror}; choose another output folder") from None
    click.echo(f"wrote {out_dir / SCRIPT}: review it, then run it with --dry-run, then without")


MAX_INSPECT_CHARS = 16 * 1024 * 1024  # `docker image inspect` of one image: a few KiB


@click.command("profile")
@click.argument("image")
@click.option(
    "--inspect",
    "inspect_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Read `docker image inspect IMAGE` output from this file ('-': stdin) instead of running docker.",
)
def profile_command(image: str, inspect_file: TextIO | None) -> None:
    """Draft an image profile for IMAGE from its docker metadata, with what must be reviewed marked."""
    import subprocess

    from compiler.diagnostics import printable
    from compiler.tools.profile_draft import InspectError, draft, parse_inspect

    if inspect_file is not None:
        # A pipe is fine here ('-', or <(docker image inspect ...)); an endless one is cut at the limit.
        try:
            text = inspect_file.read(MAX_INSPECT_CHARS + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageProblem(f"cannot read the inspect output {inspect_file.name}: {exc}") from None
        if len(text) > MAX_INSPECT_CHARS:
            raise UsageProblem(f"the inspect output {inspect_file.name} is over {MAX_INSPECT_CHARS} characters")
    else:
        try:
            run = subprocess.run(
                ["docker", "image", "inspect", "--", image], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageProblem(f"cannot run docker ({exc}); pass the inspect output with --inspect FILE") from None
        if run.returncode != 0:
            raise UsageProblem(f"docker image inspect {image} failed: {run.stderr.strip() or run.returncode}")
        text = run.stdout
    source = "docker image inspect" if inspect_file is None else printable(inspect_file.name)
    try:
        facts = parse_inspect(text, image, source)
    except InspectError as exc:
        raise UsageProblem(f"the inspect output of {image}: {exc}") from None
    digest = "" if inspect_file is not None else _entrypoint_sha256(image, facts.entrypoint)
    click.echo(draft(facts, digest), nl=False)


def _entrypoint_sha256(image: str, entrypoint: tuple[str, ...]) -> str:
    """sha256 of the entrypoint's file (an absolute path) in the image, by a throwaway container; "" when it
    cannot be read (a command found on PATH, no sha256sum in the image): the draft then says how to add it."""
    import re
    import subprocess

    if not entrypoint or not entrypoint[0].startswith("/"):
        return ""
    argv = ["docker", "run", "--rm", "--pull", "never", "--network", "none", "--entrypoint", "sha256sum"]
    try:
        run = subprocess.run([*argv, image, entrypoint[0]], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.match(r"([0-9a-f]{64})\s", run.stdout)
    return match.group(1) if run.returncode == 0 and match else ""


@click.command("import")
@click.argument("recipe", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), help="Spec file to write.")
@click.option(
    "--recipes-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The recipe's repository (a checkout), where its mods are read: they become container.hooks.",
)
def import_command(recipe: Path, out_file: Path | None, recipes_dir: Path | None) -> None:
    """Turn a spark-vllm-docker or sparkrun RECIPE into a spec; what does not map is listed as warnings."""
    from compiler.diagnostics import printable
    from compiler.spec.load import SpecReadError, read_spec
    from compiler.tools.importer import RecipeError, import_recipe

    patches = None if out_file is None else f"{out_file.stem}-mods"
    try:
        imported = import_recipe(read_spec(recipe), str(recipe), recipes_dir, patches)
    except (SpecReadError, RecipeError) as exc:
        raise UsageProblem(str(exc)) from None
    for note in imported.warnings:
        severity = "error" if note.error else "warning"
        click.echo(f"{printable(str(recipe))}:{note.line}:{note.column}: {severity}: {note}", err=True)
    if imported.errors:
        # The spec would run something other than the recipe: nothing is written until the recipe says how.
        click.echo(f"{len(imported.errors)} error(s): no spec written", err=True)
        raise SystemExit(1)
    if out_file is None:
        click.echo(imported.spec_text, nl=False)
        return
    _write_mods(out_file, imported.files)
    _write_new(out_file, imported.spec_text, "import")
    if imported.files:
        click.echo(f"wrote {out_file.parent / str(patches)}/: the mods' files ({len(imported.files)})", err=True)
    click.echo(f"wrote {out_file}; replace every PLACEHOLDER, then: sparkc validate {out_file}", err=True)


def _write_mods(out_file: Path, files: dict[str, bytes]) -> None:
    """The mods' patch folder beside the spec: a new folder (never into one that exists), before the spec
    itself, which is refused as well when it exists."""
    if not files:
        return
    folder = out_file.parent / next(iter(files)).split("/", 1)[0]
    for taken in (out_file, folder):
        if taken.exists() or taken.is_symlink():
            raise UsageProblem(f"{taken} exists; sparkc import never overwrites: choose another name with -o")
    try:
        for rel, data in sorted(files.items()):
            path = out_file.parent / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("xb") as stream:
                stream.write(data)
    except OSError as exc:
        raise UsageProblem(f"{folder}: cannot write: {exc.strerror}") from None


COMMANDS = [discover_command, init_command, setup_fabric_command, profile_command, import_command]
