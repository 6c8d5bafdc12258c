"""The whole compile, stage by stage: load -> validate -> resolve -> render -> lint. Nothing here writes."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path as FilePath
from pathlib import PurePosixPath
from typing import Any

from compiler.diagnostics import Diagnostic, Path, Severity, has_errors
from compiler.output.emit import MANIFEST
from compiler.output.gateway import finish_gateway, render_gateway
from compiler.output.kubernetes import refusals, render_kubernetes
from compiler.output.kubernetes_lws import refusals as lws_refusals
from compiler.output.kubernetes_lws import render_lws
from compiler.output.lint import LintCache, start_lint, start_lint_texts
from compiler.output.render import manifest, render, render_scripts
from compiler.output.slurm import refusals as slurm_refusals
from compiler.output.slurm import render_slurm
from compiler.plan import PATCHES_DIR, GatewayPlan, Plan
from compiler.resolve import resolve
from compiler.resolve.gateway import plan_gateway
from compiler.resolve.together import check_together
from compiler.spec.build import build_spec
from compiler.spec.include import ClusterFile, include, place, wants_file
from compiler.spec.load import Document, load_text, locate, to_plain
from compiler.spec.model_facts import ModelFacts, read_model_facts
from compiler.spec.patches import PatchFolder, read_patch_folder
from compiler.spec.profiles import Profile
from compiler.spec.schema import field_schema, load_schema, other_values, validate, with_defaults


class Target(StrEnum):
    """What a compile writes: the ssh target's scripts, Kubernetes manifests (a StatefulSet per node, or one
    LeaderWorkerSet), or a Slurm batch script."""

    SSH = "ssh"
    KUBERNETES = "kubernetes"
    KUBERNETES_LWS = "kubernetes-lws"
    SLURM = "slurm"


@dataclass(frozen=True)
class CompileResult:
    document: Document
    diagnostics: tuple[Diagnostic, ...]
    plan: Plan | None = None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


@dataclass(frozen=True)
class Beside:
    """What the compile reads besides the spec text: the operator's own image profiles, and the folder
    the spec sits in (a hooks patch folder is named relative to it; None: the spec has no folder)."""

    profiles: tuple[Profile, ...] = ()
    spec_dir: FilePath | None = None


def compile_text(
    text: str,
    spec_path: str,
    *,
    render_files: bool = True,
    strict: bool = False,
    lint: bool = True,
    lint_cache: bool = True,
    record_as: str | None = None,
    beside: Beside = Beside(),
    target: Target = Target.SSH,
) -> CompileResult:
    """Compile spec text. `spec_path` names the spec in diagnostics; the generated files record it as
    `record_as`, by default the last part of `spec_path`: the output must not depend on how the spec's
    path was spelled or where sparkc ran (see the CLI, which passes the name of the file a symlink leads to).
    `lint=False` skips shellcheck, for a check that writes nothing; `lint_cache=False` shellchecks every script
    afresh, trusting no earlier clean result. `target` chooses what the plan is rendered as (the checks up to
    the plan are the same for every target; a target adds its own refusals)."""
    recorded = record_as if record_as is not None else PurePosixPath(spec_path).name
    document, diagnostics = load_text(text, spec_path)
    cluster = None
    if not has_errors(diagnostics) and wants_file(document.data):
        cluster, problems = include(document)
        diagnostics += problems
    if has_errors(diagnostics):
        return CompileResult(document, _locate_all(document, diagnostics, strict, cluster))
    schema = load_schema()
    given = to_plain(document.data)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    # The scripts' identity of the deployment (container labels, "already running?") covers the cluster file too.
    inputs_sha256 = sha256 if cluster is None else hashlib.sha256(f"{sha256}\n{cluster.sha256}\n".encode()).hexdigest()
    refused = validate(given, schema)
    diagnostics += refused
    if has_errors(refused):
        diagnostics += _rules_beside_schema_errors(given, refused, schema, recorded, inputs_sha256, beside)
        return CompileResult(document, _locate_all(document, diagnostics, strict, cluster))
    plan, problems, patches, _ = _resolve(given, schema, recorded, inputs_sha256, beside)
    located = _locate_all(document, diagnostics + problems, strict, cluster)
    if plan is None or has_errors(located):
        return CompileResult(document, located)
    if cluster is not None:
        plan = replace(plan, cluster_file=cluster.recorded, cluster_file_sha256=cluster.sha256, spec_file_sha256=sha256)
    if target is Target.SLURM:
        return _slurm(document, located, plan, render_files, strict, cluster, lint, lint_cache)
    if target is not Target.SSH:
        return _kubernetes(document, located, plan, render_files, strict, cluster, target)
    scripts = render_scripts(plan) if render_files else {}
    # shellcheck runs while the page and the manifest are rendered.
    checking = start_lint(scripts, None if lint_cache else LintCache(None), plan=plan) if lint else None
    files = render(plan, scripts) if render_files else {}
    findings = checking.findings() if checking is not None else []
    # A lint finding is sparkc's own bug (the templates), not the user's: it is raised by the CLI.
    if findings:
        raise GeneratedScriptError("\n".join(findings))
    if render_files and patches is not None:
        # The operator's own files, beside the scripts (not linted: they run inside the containers).
        files.update((f"{PATCHES_DIR}/{f.path}", text) for f, text in zip(patches.files, patches.texts, strict=True))
    return CompileResult(document, located, plan, files)


def _kubernetes(
    document: Document,
    located: tuple[Diagnostic, ...],
    plan: Plan,
    render_files: bool,
    strict: bool,
    cluster: ClusterFile | None,
    target: Target,
) -> CompileResult:
    """A Kubernetes target: its refusals, else its manifests and the manifest.json that lists them."""
    lws = target is Target.KUBERNETES_LWS
    located += _locate_all(document, lws_refusals(plan) if lws else refusals(plan), strict, cluster)
    if has_errors(located):
        return CompileResult(document, located)
    files = (render_lws(plan) if lws else render_kubernetes(plan)) if render_files else {}
    if render_files:
        files[MANIFEST] = manifest(plan, files)
    return CompileResult(document, located, plan, files)


def _slurm(
    document: Document,
    located: tuple[Diagnostic, ...],
    plan: Plan,
    render_files: bool,
    strict: bool,
    cluster: ClusterFile | None,
    lint: bool,
    lint_cache: bool,
) -> CompileResult:
    """The Slurm target: its refusals, else the batch script (through the same lint gate as the ssh target's
    scripts) and the manifest.json that lists it."""
    located += _locate_all(document, slurm_refusals(plan), strict, cluster)
    if has_errors(located):
        return CompileResult(document, located)
    if not render_files:
        return CompileResult(document, located, plan)
    files = render_slurm(plan)
    if lint:
        texts = {PurePosixPath(name).name: text for name, text in files.items()}
        findings = start_lint_texts(texts, None if lint_cache else LintCache(None)).findings()
        if findings:
            raise GeneratedScriptError("\n".join(findings))
    files[MANIFEST] = manifest(plan, files)
    return CompileResult(document, located, plan, files)


def compile_together(results: Sequence[CompileResult], strict: bool = False) -> list[CompileResult]:
    """Specs compiled to run side by side on one cluster: each result with what clashes with the others
    (names, ports, memory on a shared node) added to its diagnostics. Only specs that compiled are compared."""
    plans = [r.plan for r in results if r.plan is not None and r.ok]
    if len(plans) < len(results):
        return list(results)
    found = check_together(plans)
    return [
        replace(r, diagnostics=r.diagnostics + _locate_all(r.document, extra, strict))
        for r, extra in zip(results, found, strict=True)
    ]


@dataclass(frozen=True)
class Gateway:
    """The gateway of deployments compiled together, and its folder's files."""

    plan: GatewayPlan
    files: dict[str, str]


def compile_gateway(
    results: Sequence[CompileResult],
    port: int | None,
    image: str,
    *,
    mounts: tuple[tuple[str, str], ...] = (),
    strict: bool = False,
    lint: bool = True,
    lint_cache: bool = True,
) -> tuple[list[CompileResult], Gateway | None]:
    """The gateway in front of deployments compiled together (ssh target): each result with what clashes with
    the gateway added to its diagnostics, and the gateway (None where a spec has errors). Its scripts pass the
    same lint gate as the deployments'."""
    plans = [r.plan for r in results if r.plan is not None and r.ok]
    if len(plans) < len(results):
        return list(results), None
    gateway, found = plan_gateway(plans, port, image, mounts)
    checked = [
        replace(r, diagnostics=r.diagnostics + _locate_all(r.document, extra, strict))
        for r, extra in zip(results, found, strict=True)
    ]
    if gateway is None or not all(r.ok for r in checked):
        return checked, None
    files = render_gateway(gateway)
    if lint:
        scripts = {name: text for name, text in files.items() if name.endswith(".sh")}
        findings = start_lint_texts(scripts, None if lint_cache else LintCache(None)).findings()
        if findings:
            raise GeneratedScriptError("\n".join(findings))
    return checked, Gateway(gateway, finish_gateway(gateway, files))


def with_problems(result: CompileResult, problems: Sequence[Diagnostic]) -> CompileResult:
    """A result with more problems about its spec (a tool's own, such as setup-fabric's), each at its place."""
    return replace(result, diagnostics=result.diagnostics + _locate_all(result.document, list(problems), False))


def _resolve(
    given: dict[str, Any], schema: dict[str, Any], spec_path: str, sha256: str, beside: Beside
) -> tuple[Plan | None, list[Diagnostic], PatchFolder | None, ModelFacts]:
    """Cross-field rules and the plan, for a spec the schema accepts (and the patch folder it names, and what
    this machine could read about the weights)."""
    spec = build_spec(with_defaults(given, schema), given)
    hooks = spec.container.hooks
    patches = None
    if hooks is not None and hooks.patches is not None:
        patches = read_patch_folder(beside.spec_dir or FilePath(), hooks.patches)
    facts = read_model_facts(spec)
    plan, problems = resolve(
        spec, spec_path=spec_path, spec_sha256=sha256, facts=facts, profiles=beside.profiles, patches=patches
    )
    return plan, problems, patches, facts


def _rules_beside_schema_errors(
    given: dict[str, Any],
    refused: list[Diagnostic],
    schema: dict[str, Any],
    spec_path: str,
    sha256: str,
    beside: Beside,
) -> list[Diagnostic]:
    """The cross-field problems of a spec with schema errors too, so that one run reports them all.

    Resolve needs a valid spec, so it runs on a repaired copy. A whole number written as a float is
    repaired to what the message asks for (8000.0 -> 8000). Any other refused value is removed and its
    default applies: a guess, and a finding that rests on a guess is not the user's problem. So resolve
    runs again with each guessed integer, boolean or choice set to other values, one at a time, and only
    findings of every run count; where no other value is plain to pick (a string, a list, the key an
    unknown key was meant to be), findings in the same part are dropped (a part: a top-level section, or
    one node). When removing leaves the copy invalid (a required key), no rule runs.
    """
    repaired = copy.deepcopy(given)
    for d in refused:
        _repair_whole_number(repaired, d.path, schema)
    guessed = [d.path for d in validate(repaired, schema)]
    for path in guessed:
        _remove(repaired, path)
    if validate(repaired, schema):
        return []
    _, problems, _, _ = _resolve(repaired, schema, spec_path, sha256, beside)
    variations: list[tuple[Path, Any]] = []
    spoiled: set[Path] = set()
    for path in guessed:
        varied, unsure = _variations(path, repaired, schema)
        variations += varied
        if unsure is not None:
            spoiled.add(unsure)
    problems = [d for d in problems if not any(_overlap(_part(d.path), part) for part in spoiled)]
    for where, value in variations:
        if not problems:
            break
        other = copy.deepcopy(repaired)
        _put(other, where, value)
        elsewise = [] if validate(other, schema) else _resolve(other, schema, spec_path, sha256, beside)[1]
        problems = [d for d in problems if d in elsewise]
    return problems


def _variations(path: Path, data: Any, schema: dict[str, Any]) -> tuple[list[tuple[Path, Any]], Path | None]:
    """Other values for what the guess at `path` stands in for, and the part it spoils where it cannot vary."""
    sub = field_schema(schema, path)
    if sub is not None:
        values = other_values(sub) if path == _whole(path) else []
        return [(path, v) for v in values], (None if values else _part(path))
    # An unknown key was meant to be one of its absent siblings: vary those that can be, spoil the parent's part
    # (all of the spec for a top-level key: it may stand for a whole section).
    parent, siblings = _get(data, path[:-1]), field_schema(schema, path[:-1]) or {}
    absent = [key for key in siblings.get("properties", {}) if isinstance(parent, dict) and key not in parent]
    variations = []
    for key in absent:
        sibling = field_schema(schema, (*path[:-1], key))
        variations += [((*path[:-1], key), v) for v in (other_values(sibling) if sibling is not None else [])]
    return variations, _part(path[:-1])


def _repair_whole_number(data: Any, path: Path, schema: dict[str, Any]) -> None:
    sub = field_schema(schema, path)
    value = _get(data, path)
    if sub is not None and sub.get("type") == "integer" and isinstance(value, float) and value.is_integer():
        _put(data, path, int(value))


def _get(data: Any, path: Path) -> Any:
    for part in path:
        if not _has(data, part):
            return None
        data = data[part]
    return data


def _put(data: Any, path: Path, value: Any) -> None:
    parent = _get(data, path[:-1])
    if path and (_has(parent, path[-1]) or (isinstance(parent, dict) and isinstance(path[-1], str))):
        parent[path[-1]] = value


def _has(data: Any, part: str | int) -> bool:
    if isinstance(data, dict):
        return part in data
    return isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)


def _whole(path: Path) -> Path:
    """What `_remove` takes away for `path`: a list item takes its whole list (indexes must not shift)."""
    while path and isinstance(path[-1], int):
        path = path[:-1]
    return path


def _remove(data: Any, path: Path) -> None:
    path = _whole(path)
    parent = _get(data, path[:-1])
    if path and isinstance(parent, dict):
        parent.pop(path[-1], None)


def _part(path: Path) -> Path:
    return path[:3] if path[:2] == ("cluster", "nodes") else path[:1]


def _overlap(a: Path, b: Path) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def _locate_all(
    document: Document, diagnostics: list[Diagnostic], strict: bool, cluster: ClusterFile | None = None
) -> tuple[Diagnostic, ...]:
    result = []
    for d in (place(d, cluster) for d in diagnostics):
        if strict and d.severity is Severity.WARNING:
            d = replace(d, severity=Severity.ERROR, message=d.message + " (--strict)")
        if not d.fixed_position and document.data is not None:
            line, column = locate(document.data, d.path, at_key=d.at_key)
            d = replace(d, line=line, column=column)
        result.append(d)
    return tuple(result)


class GeneratedScriptError(Exception):
    """A generated script failed shellcheck or bash -n: a bug in sparkc's templates."""
