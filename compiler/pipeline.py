"""The whole compile, stage by stage: load -> validate -> resolve -> render -> lint. Nothing here writes."""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from compiler.diagnostics import Diagnostic, Path, Severity, has_errors
from compiler.lint import lint_scripts
from compiler.loader import Document, load_text, locate, to_plain
from compiler.plan import Plan
from compiler.render import render
from compiler.resolve import resolve
from compiler.schema import load_schema, validate, with_defaults


@dataclass(frozen=True)
class CompileResult:
    document: Document
    diagnostics: tuple[Diagnostic, ...]
    plan: Plan | None = None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> text

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def compile_text(text: str, spec_path: str, *, render_files: bool = True, strict: bool = False) -> CompileResult:
    """Compile spec text; `spec_path` is how the spec is named in diagnostics and generated headers."""
    document, diagnostics = load_text(text, spec_path)
    if has_errors(diagnostics):
        return CompileResult(document, _locate_all(document, diagnostics, strict))
    schema = load_schema()
    given = to_plain(document.data)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    refused = validate(given, schema)
    diagnostics += refused
    if has_errors(refused):
        diagnostics += _rules_beside_schema_errors(given, refused, schema, spec_path, sha256)
        return CompileResult(document, _locate_all(document, diagnostics, strict))
    plan, problems = _resolve(given, schema, spec_path, sha256)
    located = _locate_all(document, diagnostics + problems, strict)
    if plan is None or has_errors(located):
        return CompileResult(document, located)
    files = render(plan) if render_files else {}
    findings = lint_scripts(files) if render_files else []
    # A lint finding is sparkc's own bug (the templates), not the user's: it is raised by the CLI.
    if findings:
        raise GeneratedScriptError("\n".join(findings))
    return CompileResult(document, located, plan, files)


def _resolve(given: dict[str, Any], schema: dict[str, Any], spec_path: str,
             sha256: str) -> tuple[Plan | None, list[Diagnostic]]:
    """Cross-field rules and the plan, for a spec the schema accepts."""
    return resolve(with_defaults(given, schema), given=given, spec_path=spec_path, spec_sha256=sha256)


def _rules_beside_schema_errors(given: dict[str, Any], refused: list[Diagnostic], schema: dict[str, Any],
                                spec_path: str, sha256: str) -> list[Diagnostic]:
    """The cross-field problems of a spec with schema errors too, so that one run reports them all.

    Resolve needs a valid spec, so it runs on a copy without the values the schema refused (their
    defaults apply); when that copy is still invalid (a required key was refused) no rule runs. A
    rule that read a removed value may report a problem the spec does not have, so only findings
    outside every part with a schema error are kept (a part: a top-level section, or one node).
    """
    repaired = copy.deepcopy(given)
    for d in refused:
        _remove(repaired, d.path)
    if validate(repaired, schema):
        return []
    _, problems = _resolve(repaired, schema, spec_path, sha256)
    spoiled = {_part(d.path) for d in refused}
    return [d for d in problems if not any(_overlap(_part(d.path), part) for part in spoiled)]


def _remove(data: Any, path: Path) -> None:
    """Remove the value at `path`; a list item takes its whole list with it (indexes must not shift)."""
    while path and isinstance(path[-1], int):
        path = path[:-1]
    if not path:
        return
    for part in path[:-1]:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return
    if isinstance(data, dict):
        data.pop(path[-1], None)


def _part(path: Path) -> Path:
    return path[:3] if path[:2] == ("cluster", "nodes") else path[:1]


def _overlap(a: Path, b: Path) -> bool:
    return a[:len(b)] == b or b[:len(a)] == a


def _locate_all(document: Document, diagnostics: list[Diagnostic], strict: bool) -> tuple[Diagnostic, ...]:
    result = []
    for d in diagnostics:
        if strict and d.severity is Severity.WARNING:
            d = replace(d, severity=Severity.ERROR, message=d.message + " (--strict)")
        if not d.fixed_position and document.data is not None:
            line, column = locate(document.data, d.path, at_key=d.at_key)
            d = replace(d, line=line, column=column)
        result.append(d)
    return tuple(result)


class GeneratedScriptError(Exception):
    """A generated script failed shellcheck or bash -n: a bug in sparkc's templates."""
