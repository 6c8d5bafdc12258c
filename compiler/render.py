"""Render a Plan into file texts. The only module that knows Jinja; templates read the plan, decide nothing."""
from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict
from functools import lru_cache
from typing import Any

import jinja2

from compiler.plan import Plan
from compiler.resolve import ENGINE_WRAPPER
from compiler.resources import data_dir

SCRIPTS = ("launch-cluster.sh", "stop-cluster.sh", "status.sh", "logs.sh")
MANIFEST = "manifest.json"


def quote(value: Any) -> str:
    """The one way a value enters a script: shell-quoted, so it is always data, never code."""
    text = str(value)
    if "$" in text or "`" in text:
        # Single quotes would be right too, but shellcheck reads '$(...)' as a forgotten expansion
        # (SC2016); double quotes with every special character escaped say the same to bash.
        return '"' + re.sub(r'([\\$"`])', r"\\\1", text) + '"'
    if "," in text and "'" not in text:
        return f"'{text}'"  # shlex leaves commas bare; in an array shellcheck reads them as a mistake (SC2054)
    return shlex.quote(text)


# Flags that take no value: never shown on one line with the word after them.
BARE_FLAGS = {"-d", "--privileged", "--rm", "--head", "--block", "--disable-usage-stats", "--headless",
              "--trust-remote-code", "--enforce-eager"}


def words(values: Iterable[Any], indent: int = 2) -> str:
    """A bash array's body: `()` when empty, else one quoted word per line."""
    items = [quote(v) for v in values]
    return _array([[w] for w in items], indent)


def argv_lines(values: Iterable[Any], indent: int = 2, named: dict[str, str] | None = None) -> str:
    """A command's words as a bash array's body: the command's leading words (`docker run`) share a
    line, and so does each flag with its value, for the reviewer; the words are the same either way."""
    items = [str(v) for v in values]
    lines: list[list[str]] = []
    for i, word in enumerate(items):
        previous = items[i - 1] if i else ""
        leading = i > 0 and all(not w.startswith("-") for w in items[: i + 1])
        pairs = previous.startswith("-") and previous not in BARE_FLAGS and "=" not in previous
        if lines and (leading or (pairs and not word.startswith("-") and len(lines[-1]) == 1)):
            lines[-1].append(word)
        else:
            lines.append([word])
    named = named or {}  # words shown by a variable that holds them (long scripts, for the reviewer)
    return _array([[named.get(w) or quote(w) for w in line] for line in lines], indent)


def single_quote(value: Any) -> str:
    """Always '...': for static script text that bash must not expand (shellcheck's SC2016 is expected)."""
    return "'" + str(value).replace("'", "'\\''") + "'"


def _array(lines: list[list[str]], indent: int) -> str:
    if not lines:
        return "()"
    pad = " " * indent
    body = "\n".join(pad + " ".join(line) for line in lines)
    return f"(\n{body}\n{' ' * max(indent - 2, 0)})"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
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
    env.filters["q"] = quote
    env.filters["words"] = words
    env.filters["argv"] = argv_lines
    env.filters["single_quote"] = single_quote
    env.globals["ENGINE_WRAPPER"] = ENGINE_WRAPPER
    env.filters["json"] = lambda v: json.dumps(v)
    return env


def render(plan: Plan) -> dict[str, str]:
    files = {name: environment().get_template(name + ".j2").render(plan=plan) for name in SCRIPTS}
    files[MANIFEST] = manifest(plan, files)
    return files


def manifest(plan: Plan, files: dict[str, str]) -> str:
    data: dict[str, Any] = {
        "sparkc_version": plan.sparkc_version,
        "spec": {"path": plan.spec_path, "sha256": plan.spec_sha256},
        "plan": asdict(plan),
        "files": {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(files.items())},
    }
    # Provenance already heads the manifest; keep the plan's copy out to avoid two sources of truth.
    for key in ("sparkc_version", "spec_path", "spec_sha256"):
        data["plan"].pop(key)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
