"""Every string field of a spec, and a secret's value, with every payload: refused with a clear message,
or delivered to every node exactly as written, as one word, whatever the worker's login shell, and
never run. See corpus.py for the fields and payloads, harness.py for how a case runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from compiler.cli.main import main
from compiler.output.render import render
from compiler.pipeline import compile_text
from tests.product import needs
from tests.security.corpus import CANARY, SECRET_NAME, SECRET_SAMPLE, Case, cases
from tests.security.harness import (
    OTHER_SHELLS,
    SHELLS,
    arrival_problems,
    base_spec,
    deliver,
    everything_recorded,
    refusal_problems,
    spec_text,
)
from tests.specs import with_changes

pytestmark = pytest.mark.security

CASES = list(cases())
# For zsh and busybox sh: the payloads about quoting and bytes, in the fields that reach a node as a
# docker word, an env value, an ssh word and a secret (the rest of the corpus is the same path).
OTHER_SHELL_FIELDS = {
    "engine.args.0", "container.env.value", "ssh.identity_file", "secret.value", "ray.engine.args.0",
    "cluster.hooks.pre_launch.0",
}  # fmt: skip
OTHER_SHELL_PAYLOADS = {
    "squote", "quote_escape", "subst", "backtick", "backslash_end", "newline", "cr", "latin", "cjk", "dash",
    "star", "tilde", "empty", "canary_squote", "canary_nonascii", "canary_all_quotes", "canary_newline",
}  # fmt: skip
OTHER_SHELL_CASES = [c for c in CASES if c.field.id in OTHER_SHELL_FIELDS and c.payload in OTHER_SHELL_PAYLOADS]


def secret_env(case: Case, value: str) -> dict[str, str]:
    """The launcher's environment: the secret's value, under its name."""
    if case.field.secret == "value":
        return {SECRET_NAME: value}
    if case.field.secret == "name":
        return {value: SECRET_SAMPLE}
    return {}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_value_is_refused_clearly_or_reaches_every_node_as_written(
    case: Case, tmp_path: Path, fake_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    check_case(case, tmp_path, fake_path, capsys)


@pytest.mark.parametrize("case", OTHER_SHELL_CASES, ids=[c.id for c in OTHER_SHELL_CASES])
def test_value_reaches_nodes_whose_login_shell_is_zsh_or_busybox(
    case: Case, tmp_path: Path, fake_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    needs(not all(shutil.which(s.split()[0]) for s, _ in OTHER_SHELLS), "needs zsh and busybox")
    check_case(case, tmp_path, fake_path, capsys, OTHER_SHELLS)


def check_case(
    case: Case,
    tmp_path: Path,
    fake_path: str,
    capsys: pytest.CaptureFixture[str],
    shells: Sequence[tuple[str, str]] = SHELLS,
) -> None:
    canary = tmp_path / CANARY
    value = case.value(str(canary))
    spec = base_spec(case.field)
    if case.field.secret != "value":
        spec = with_changes(spec, case.field.changes(value))
    text = spec_text(spec)
    result = compile_text(text, "spec.yaml", render_files=False)  # the lint gate: see test_lint_sample.py
    if case.field.secret != "value" and case.field.refused(value):
        assert not result.ok, f"{value!r} must be refused in {case.field.id}"

    if not result.ok:
        assert case.field.secret != "value", "a secret's value is never in the spec"
        assert refusal_problems(result.diagnostics, case.field) == []
        # The command line says the same, with exit 1 (not 3, a bug), and no traceback.
        (tmp_path / "spec.yaml").write_text(text, encoding="utf-8")
        capsys.readouterr()
        assert main(["validate", str(tmp_path / "spec.yaml"), "--format", "json"]) == 1
        printed = capsys.readouterr()
        assert "Traceback" not in printed.out + printed.err and "bug" not in printed.err
        assert all(d["line"] > 0 for d in json.loads(printed.out)["diagnostics"])
        assert not canary.exists()
        return

    assert result.plan is not None
    files = render(result.plan)
    runs = deliver(result.plan, files, tmp_path, fake_path, secret_env(case, value), shells)
    assert arrival_problems(result.plan, runs, case.field.arrives(value)) == []
    # (a short value may stand in the generated text by chance: in the library's prose, say)
    if case.field.secret == "value" and len(value) >= 3 and not any(value in text for text in files.values()):
        # on no command line (ssh's, docker's), in no generated file, in no output
        assert value not in everything_recorded(runs, files)
    assert not canary.exists()
