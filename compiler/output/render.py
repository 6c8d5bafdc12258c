"""Render a Plan into file texts. The only module that knows Jinja; templates read the plan, decide nothing."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, fields
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.names import RESERVED_PREFIXES, SECRET_NAME, SHELL_NAMES
from compiler.output.emit import MANIFEST
from compiler.output.folder_guard import SYSTEMD
from compiler.output.library import library_path, library_sha256, library_text
from compiler.output.plan_page import PAGE, plan_page
from compiler.plan import (
    BENCH_RESULTS,
    BUILD_PLACEHOLDER,
    MAX_LAUNCH_TIMEOUT,
    MPI_SSHD_PLACEHOLDER,
    PATCHES_DIR,
    PATCHES_PLACEHOLDER,
    Plan,
)
from compiler.resources import compiled_templates, data_dir

if TYPE_CHECKING:
    import jinja2

SCRIPTS = (
    "launch-cluster.sh",
    "stop-cluster.sh",
    "status.sh",
    "logs.sh",
    "distribute.sh",
    "fetch-model.sh",
    "bench.sh",
    "install-service.sh",
)
GITATTRIBUTES = ".gitattributes"
# Review tools (GitHub, GitLab) fold the library: it is sparkc's code, the same for every deployment.
GITATTRIBUTES_TEXT = "# Written by sparkc: lib/ is sparkc's own code, the same for every deployment.\n" + (
    "lib/** linguist-generated=true\n"
)


# Words bash reads as one literal without quotes. Not the comma (shlex's safe set has it): in an array
# shellcheck reads a bare comma as a mistake (SC2054).
_BARE = re.compile(r"[A-Za-z0-9_@%+=:./-]+")
# Written outside the single quotes, each after a backslash: a quote cannot stand inside them, and
# shellcheck reads $ and ` in them as a forgotten expansion (SC2016), a backslash before the closing
# quote as an attempt to escape it (SC1003).
_SPECIAL = re.compile(r"([\\$`'])")


# A word with `=` that shellcheck reads as the data it is, bare: `NAME=value`, `--flag=value`.
_PLAIN_EQUALS = re.compile(r"[A-Za-z_-][^+@]*")


def quote(value: Any) -> str:
    """The one way a value enters a script: shell-quoted, so it is always data, never code.
    Booleans become 1 and 0, what the scripts test with (( )).

    Only single quotes and backslash-escaped ASCII outside them, never double quotes: under GBK, Big5
    or Shift_JIS a byte 0x5C (backslash) can be the second half of a character, so a "...\\$..." that
    is right in UTF-8 lets `$` loose in the caller's locale. Here a backslash never follows a byte of
    the value, and ' (0x27) is never part of a character in those encodings, so every locale reads
    the same words."""
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    if text.startswith("~"):
        # '~/x' is right, but shellcheck reads it as a tilde meant to expand (SC2088).
        return "\\~" + quote(text[1:]) if len(text) > 1 else "\\~"
    if _BARE.fullmatch(text) and ("=" not in text or _PLAIN_EQUALS.fullmatch(text)):
        # Bare, a word whose `=` follows only digits, or `+`/`@` (where shellcheck starts a new piece of the
        # word), is read as a mistaken assignment: SC2191 in an array, SC1097 after `NAME=`.
        return text
    parts = (part for part in _SPECIAL.split(text) if part)
    return "".join("\\" + part if _SPECIAL.fullmatch(part) else f"'{part}'" for part in parts) or "''"


def words(values: Iterable[Any], indent: int = 2) -> str:
    """A bash array's body: `()` when empty, else one quoted word per line."""
    items = [quote(v) for v in values]
    if not items:
        return "()"
    return "(\n" + "\n".join(" " * indent + w for w in items) + f"\n{' ' * max(indent - 2, 0)})"


def lines(command: Iterable[Iterable[Any]], indent: int = 2) -> str:
    """A command's groups of words, one group per line, each word quoted: the body of a bash array."""
    return "\n".join(" " * indent + " ".join(quote(w) for w in group) for group in command)


@dataclass(frozen=True)
class SplitRuns:
    """The nodes' `docker run` commands as the launch script writes them: the option groups every node's has
    (in the head's order), then each node's own groups, its entrypoint, image and command (by rank)."""

    shared: tuple[tuple[str, ...], ...]
    own: tuple[tuple[tuple[str, ...], ...], ...]

    spans: tuple[str, ...]  # where each node's own words lie among all nodes' own words: `START COUNT`


def split_runs(commands: Iterable[Iterable[Iterable[str]]], image: str) -> SplitRuns:
    """`commands` (one per node, by rank, groups of words) split into what all share and what each adds.
    An option group is shared when every node's command has it before the image; docker reads its options
    in any order (none is given twice), so the words run are the same, in a reviewable order."""
    runs = [[tuple(group) for group in command] for command in commands]
    options = [run[: run.index((image,))] for run in runs]
    common = set(options[0]).intersection(*options[1:])
    shared = tuple(group for group in options[0] if group in common)
    own = tuple(tuple(group for group in run if group not in common) for run in runs)
    spans, start = [], 0
    for groups in own:  # one after another, by rank, as bash's `${array[@]:START:COUNT}` takes them
        count = sum(len(group) for group in groups)
        spans.append(f"{start} {count}")
        start += count
    return SplitRuns(shared, own, tuple(spans))


def comment(value: Any) -> str:
    """A value shown in a `#` comment: anything that could end the comment line (a line break of any
    kind, any control character) becomes `?`, so the value stays inside the comment."""
    return "".join("?" if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in str(value))


_skeleton: ContextVar[bool] = ContextVar("sparkc_skeleton", default=False)


def _value(placeholder: str, function: Callable[..., str]) -> Callable[..., str]:
    """`function` as a template filter, writing `placeholder` instead while skeletons() renders."""

    def apply(value: Any, *args: Any, **kwargs: Any) -> str:
        return placeholder if _skeleton.get() else function(value, *args, **kwargs)

    return apply


@lru_cache(maxsize=8)
def bash(name: str) -> str:
    """A plain bash file of runtime/, verbatim (setup-fabric.sh takes its sh_quote from common.sh)."""
    return (data_dir("runtime") / name).read_text(encoding="utf-8")


def launch_timeout_minimum() -> int:
    from compiler.spec.schema import load_schema

    minimum = load_schema()["properties"]["launch"]["properties"]["timeout"]["minimum"]
    assert isinstance(minimum, int)
    return minimum


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    import jinja2  # here, not at the top: `validate`, `explain` and `--help` never render

    # A built sparkc has its templates compiled to Python modules (setup.py, with compile_templates below; pip
    # byte-compiles them as it installs): loading them costs a few milliseconds where compiling the templates'
    # source costs about 60. A source checkout has none and reads templates/.
    compiled = compiled_templates()
    if compiled.is_dir():
        env = _environment(jinja2.ModuleLoader(str(compiled)))
    else:
        env = _environment(jinja2.FileSystemLoader(str(data_dir("templates"))))
    # Values the templates read when they render (compiling needs none of them).
    env.globals["bench_results"] = BENCH_RESULTS
    env.globals["patches_dir"] = PATCHES_DIR
    env.globals["patches_placeholder"] = PATCHES_PLACEHOLDER
    env.globals["build_placeholder"] = BUILD_PLACEHOLDER
    env.globals["mpi_sshd_placeholder"] = MPI_SSHD_PLACEHOLDER
    # What `launch-cluster.sh --env NAME=VALUE` refuses besides the SPARKC_, BASH_ and LC_ prefixes: the
    # shell's own names, the list the compiler checks the spec's secrets with.
    env.globals["reserved_names"] = " ".join(sorted(n for n in SHELL_NAMES if not n.startswith(RESERVED_PREFIXES)))
    env.globals["secret_name_pattern"] = SECRET_NAME.pattern
    # What `launch-cluster.sh --timeout` takes: what the spec's launch.timeout may be.
    env.globals["timeout_bounds"] = (launch_timeout_minimum(), MAX_LAUNCH_TIMEOUT)
    env.globals["split_runs"] = split_runs
    return env


def compile_templates(target: Path) -> None:
    """Every template compiled to a Python module under `target`, for environment()'s ModuleLoader. Runs when
    sparkc is built, with only Jinja installed."""
    import jinja2

    env = _environment(jinja2.FileSystemLoader(str(data_dir("templates"))))
    env.compile_templates(str(target), zip=None, ignore_errors=False, filter_func=lambda name: name.endswith(".j2"))


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The options and filters a template is compiled with (the same for compiling at build and at render)."""
    import jinja2

    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # `{#` would swallow bash's `${#array[@]}`.
        comment_start_string="{##",
        comment_end_string="##}",
    )
    # Every value reaches a script through one of these; while skeletons() renders, each writes a placeholder.
    env.filters["q"] = _value("v", quote)
    env.filters["words"] = _value("(v)", words)
    env.filters["lines"] = _value("  v", lines)
    env.filters["comment"] = _value("v", comment)
    # Raw UTF-8, as the engines' JSON answers carry it: /v1/models is matched against this text.
    env.filters["json"] = _value("v", lambda v: json.dumps(v, ensure_ascii=False))
    return env


@dataclass(frozen=True)
class Library:
    """The library the scripts source (compiler/output/library.py), as the templates name it."""

    version: str
    path: str
    sha256: str


def library_of(plan: Plan) -> Library:
    version = plan.sparkc_version
    return Library(version, library_path(version), library_sha256(version))


def render_scripts(plan: Plan) -> dict[str, str]:
    """The deployment's scripts (what a compile shellchecks)."""
    library = library_of(plan)
    return {name: environment().get_template(name + ".j2").render(plan=plan, library=library) for name in SCRIPTS}


def render(plan: Plan, scripts: dict[str, str] | None = None) -> dict[str, str]:
    """The build folder's files: the scripts (`scripts`, rendered already, else here), the library they
    source, .gitattributes, PLAN.md and the manifest."""
    library = library_of(plan)
    files = dict(scripts) if scripts is not None else render_scripts(plan)
    if plan.service is not None:
        unit = environment().get_template("systemd/unit.service.j2").render(plan=plan)
        files[f"{SYSTEMD}/{plan.service.unit}"] = unit
    files.update(plan.engine_files)  # the engine's own files (TensorRT-LLM's options, mpirun's hostfile)
    files[library.path] = library_text(library.version)
    files[GITATTRIBUTES] = GITATTRIBUTES_TEXT
    files[PAGE] = plan_page(plan)
    files[MANIFEST] = manifest(plan, files)
    return files


def skeletons(plan: Plan) -> dict[str, str]:
    """Each script as its template writes it for `plan`, every value a placeholder of its kind (a word, an
    array): the template's own text, where compiler/output/lint.py finds the constants the template assigns."""
    token = _skeleton.set(True)
    try:
        return render_scripts(plan)
    finally:
        _skeleton.reset(token)


def _plain(value: Any) -> Any:
    """`value` as JSON's types: dataclasses.asdict without its deep copy of every word (a plan's values are
    immutable), which at 64 nodes is most of the manifest's time."""
    if isinstance(value, (str, int, float)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    kind: type = type(value)  # a dataclass of the plan
    return {name: _plain(getattr(value, name)) for name in _field_names(kind)}


@cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def manifest(plan: Plan, files: dict[str, str]) -> str:
    data: dict[str, Any] = {
        "sparkc_version": plan.sparkc_version,
        "spec": {"name": plan.spec_path, "sha256": plan.spec_sha256},
        "plan": _plain(plan),
        "library": {"path": library_of(plan).path, "sha256": library_of(plan).sha256},
        "files": {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(files.items())},
    }
    # Provenance already heads the manifest; keep the plan's copy out to avoid two sources of truth.
    if plan.cluster_file:
        data["spec"] = {"path": plan.spec_path, "sha256": plan.spec_file_sha256, "inputs_sha256": plan.spec_sha256}
        data["cluster_file"] = {"path": plan.cluster_file, "sha256": plan.cluster_file_sha256}
    for key in (
        "sparkc_version",
        "spec_path",
        "spec_sha256",
        "cluster_file",
        "cluster_file_sha256",
        "spec_file_sha256",
    ):
        data["plan"].pop(key)
    # Optional parts appear only where the spec uses them: a spec without them keeps its manifest.
    for node in data["plan"]["nodes"]:
        if node["planes"] is None:
            del node["planes"]
    for optional in ("hooks", "host_hooks"):
        if data["plan"][optional] is None:
            del data["plan"][optional]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
