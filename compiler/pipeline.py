"""The whole compile, stage by stage: load -> validate -> resolve -> render -> lint. Nothing here writes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from compiler.diagnostics import Diagnostic, Severity, has_errors
from compiler.lint import lint_scripts
from compiler.loader import Document, load_text, locate, to_plain
from compiler.plan import Plan
from compiler.render import render
from compiler.resolve import resolve
from compiler.schema import load_schema, validate, with_defaults
from compiler.spec import build_spec


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
    if not has_errors(diagnostics):
        schema = load_schema()
        given = to_plain(document.data)
        diagnostics += validate(given, schema)
        if not has_errors(diagnostics):
            spec = build_spec(with_defaults(given, schema), given)
            plan, problems = resolve(
                spec, spec_path=spec_path, spec_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest()
            )
            diagnostics += problems
            located = _locate_all(document, diagnostics, strict)
            if plan is None or has_errors(located):
                return CompileResult(document, located)
            files = render(plan) if render_files else {}
            findings = lint_scripts(files) if render_files else []
            # A lint finding is sparkc's own bug (the templates), not the user's: it is raised by the CLI.
            if findings:
                raise GeneratedScriptError("\n".join(findings))
            return CompileResult(document, located, plan, files)
    return CompileResult(document, _locate_all(document, diagnostics, strict))


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
