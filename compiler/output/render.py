"""Render a Plan into file texts. The only module that knows Jinja; templates read the plan, decide nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, fields
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.output.bash_words import SplitRuns, comment, lines, quote, split_runs, words
from compiler.output.deployment import DEPLOYMENT, render_constants
from compiler.output.emit import MANIFEST
from compiler.output.folder_guard import SYSTEMD
from compiler.output.library import library_path, library_sha256, library_text
from compiler.output.plan_page import BUILD_SCRIPT, PAGE, plan_page
from compiler.plan import Plan
from compiler.resources import compiled_templates, data_dir

if TYPE_CHECKING:
    import jinja2

# quote, split_runs and the rest live in compiler/output/bash_words.py; named here too, where tests find them.
__all__ = [
    "BUILD_SCRIPT",
    "SCRIPTS",
    "SplitRuns",
    "comment",
    "lines",
    "quote",
    "render",
    "render_scripts",
    "skeletons",
    "split_runs",
    "words",
]

SCRIPTS = (
    "launch-cluster.sh",
    "stop-cluster.sh",
    "status.sh",
    "logs.sh",
    "distribute.sh",
    "fetch-model.sh",
    "bench.sh",
    "install-service.sh",
    "watch.sh",
)
GITATTRIBUTES = ".gitattributes"
# Review tools (GitHub, GitLab) fold the library: it is sparkc's code, the same for every deployment.
GITATTRIBUTES_TEXT = "# Written by sparkc: lib/ is sparkc's own code, the same for every deployment.\n" + (
    "lib/** linguist-generated=true\n"
)


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
    """The deployment's scripts (what a compile shellchecks): the entry scripts and deployment.sh they source."""
    library = library_of(plan)
    names = (BUILD_SCRIPT, *SCRIPTS) if plan.build else SCRIPTS
    scripts = {name: environment().get_template(name + ".j2").render(plan=plan, library=library) for name in names}
    constants = render_constants(plan, placeholder=_skeleton.get())
    template = environment().get_template(DEPLOYMENT + ".j2")
    scripts[DEPLOYMENT] = template.render(plan=plan, library=library, constants=constants)
    return scripts


def render(plan: Plan, scripts: dict[str, str] | None = None) -> dict[str, str]:
    """The build folder's files: the scripts (`scripts`, rendered already, else here), the library they
    source, .gitattributes, PLAN.md and the manifest."""
    library = library_of(plan)
    files = dict(scripts) if scripts is not None else render_scripts(plan)
    if plan.service is not None:
        unit = environment().get_template("systemd/unit.service.j2").render(plan=plan)
        files[f"{SYSTEMD}/{plan.service.unit}"] = unit
        watch = environment().get_template("systemd/watch.service.j2").render(plan=plan)
        files[f"{SYSTEMD}/{plan.service.watch_unit}"] = watch
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
    for optional in ("hooks", "host_hooks", "build"):
        if data["plan"][optional] is None:
            del data["plan"][optional]
    if not data["plan"]["watch_on_failure"]:
        del data["plan"]["watch_on_failure"]
    if not data["plan"]["model"]["aliases"]:
        del data["plan"]["model"]["aliases"]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
