"""Render a Plan into file texts. The only module that knows Jinja; templates read the plan, decide nothing."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from compiler.emit import MANIFEST
from compiler.layout import Layout, library, marking, split, value_filter
from compiler.names import SCRIPT_NAMES, SECRET_NAME, SHELL_NAMES
from compiler.plan import PATCHES_DIR, PATCHES_PLACEHOLDER, Plan
from compiler.resources import data_dir

if TYPE_CHECKING:
    import jinja2

SCRIPTS = ("launch-cluster.sh", "stop-cluster.sh", "status.sh", "logs.sh", "distribute.sh")


# A word with `=` that shellcheck reads as the data it is, bare: `NAME=value`, `--flag=value`.
_PLAIN_EQUALS = re.compile(r"[A-Za-z_-][^+@]*")


def quote(value: Any) -> str:
    """The one way a value enters a script: shell-quoted, so it is always data, never code.
    Booleans become 1 and 0, what the scripts test with (( ))."""
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    if text.startswith("~"):
        # '~/x' and "~/x" are right, but shellcheck reads them as a tilde meant to expand (SC2088).
        return "\\~" + quote(text[1:]) if len(text) > 1 else "\\~"
    if "$" in text or "`" in text or "\\" in text:
        # Single quotes would be right too, but shellcheck reads '$(...)' as a forgotten expansion
        # (SC2016) and a backslash before a closing quote as an attempt to escape it (SC1003);
        # double quotes with every special character escaped say the same to bash.
        return '"' + re.sub(r'([\\$"`])', r"\\\1", text) + '"'
    if "=" in text and "'" not in text and not _PLAIN_EQUALS.fullmatch(text):
        # Bare, a word whose `=` follows only digits, or `+`/`@` (where shellcheck starts a new piece of the
        # word), is read as a mistaken assignment: SC2191 in an array, SC1097 after `NAME=`.
        return f"'{text}'"
    if "," in text and "'" not in text:
        return f"'{text}'"  # shlex leaves commas bare; in an array shellcheck reads them as a mistake (SC2054)
    return shlex.quote(text)


def words(values: Iterable[Any], indent: int = 2) -> str:
    """A bash array's body: `()` when empty, else one quoted word per line."""
    items = [quote(v) for v in values]
    if not items:
        return "()"
    return "(\n" + "\n".join(" " * indent + w for w in items) + f"\n{' ' * max(indent - 2, 0)})"


def lines(command: Iterable[Iterable[Any]], indent: int = 2) -> str:
    """A command's groups of words, one group per line, each word quoted: the body of a bash array."""
    return "\n".join(" " * indent + " ".join(quote(w) for w in group) for group in command)


def comment(value: Any) -> str:
    """A value shown in a `#` comment: anything that could end the comment line (a line break of any
    kind, any control character) becomes `?`, so the value stays inside the comment."""
    return "".join("?" if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in str(value))


@lru_cache(maxsize=8)
def bash(name: str) -> str:
    """A plain bash file of templates/lib/, verbatim: the scripts' functions, which no value reaches."""
    return (data_dir("templates") / "lib" / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    import jinja2  # here, not at the top: `validate`, `explain` and `--help` never render

    from compiler.template_cache import TemplateCache

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # `{#` would swallow bash's `${#array[@]}`.
        comment_start_string="{##",
        comment_end_string="##}",
    )
    # Every value reaches a script through one of these; while layout() renders, each marks what it wrote.
    env.filters["q"] = value_filter("q", quote)
    env.filters["words"] = value_filter("w", words)
    env.filters["lines"] = value_filter("l", lines)
    env.filters["comment"] = value_filter("c", comment)
    env.globals["bash"] = lambda name: library(bash(name))
    env.globals["patches_dir"] = PATCHES_DIR
    env.globals["patches_placeholder"] = PATCHES_PLACEHOLDER
    # What `launch-cluster.sh --env NAME=VALUE` refuses, from the lists the compiler checks the spec with.
    env.globals["reserved_names"] = " ".join(sorted(SHELL_NAMES | SCRIPT_NAMES))
    env.globals["secret_name_pattern"] = SECRET_NAME.pattern
    # Raw UTF-8, as the engines' JSON answers carry it: /v1/models is matched against this text.
    env.filters["json"] = value_filter("j", lambda v: json.dumps(v, ensure_ascii=False))
    env.bytecode_cache = TemplateCache.for_environment(env)
    return env


def render(plan: Plan) -> dict[str, str]:
    files = {name: environment().get_template(name + ".j2").render(plan=plan) for name in SCRIPTS}
    files[MANIFEST] = manifest(plan, files)
    return files


def layouts(plan: Plan, files: dict[str, str]) -> dict[str, Layout]:
    """Each script's values and shape (see compiler/layout.py), where its marked render agrees with `files`."""
    found = {}
    with marking():
        for name in SCRIPTS:
            marked = environment().get_template(name + ".j2").render(plan=plan)
            layout = split(marked, files.get(name, ""))
            if layout is not None:
                found[name] = layout
    return found


def manifest(plan: Plan, files: dict[str, str]) -> str:
    data: dict[str, Any] = {
        "sparkc_version": plan.sparkc_version,
        "spec": {"name": plan.spec_path, "sha256": plan.spec_sha256},
        "plan": asdict(plan),
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
    if data["plan"]["hooks"] is None:
        del data["plan"]["hooks"]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
