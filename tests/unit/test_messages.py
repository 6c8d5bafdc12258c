"""Messages a new user meets first: each says what is wrong in the user's words and what to write instead.

None names a Python or YAML-library type, a regular expression or a Python repr of a list or mapping.
"""

from __future__ import annotations

import re

import pytest

from compiler.diagnostics import Diagnostic, Severity, display_path, format_text
from compiler.pipeline import compile_text
from tests.specs import EXAMPLES

SOLO = (EXAMPLES / "solo-qwen3-32b.yaml").read_text(encoding="utf-8")
# What must never reach a user: library type names, regexes, Python reprs of containers.
_INTERNAL = re.compile(r"Commented|Scalar(Float|Int|String)|<block|\^\[|\[\'\w|\{\'\w|\bNone\b|of type '")


def errors(text: str) -> list[Diagnostic]:
    result = compile_text(text, "spec.yaml", render_files=False)
    return [d for d in result.diagnostics if d.severity is Severity.ERROR]


def one(text: str) -> Diagnostic:
    (found,) = errors(text)
    assert not _INTERNAL.search(found.message), found.message
    return found


def test_a_fabric_ip_with_a_prefix_length_says_to_drop_it() -> None:
    found = one(SOLO.replace("ip: 192.168.100.10", "ip: 10.0.0.1/24"))
    assert found.message == (
        "'10.0.0.1/24' must be the fabric address alone, without the prefix length: write 10.0.0.1"
    )
    assert (found.line, found.column) == (8, 20)


def test_a_fabric_ip_that_is_a_host_name_still_says_so() -> None:
    found = one(SOLO.replace("ip: 192.168.100.10", "ip: spark-a.fabric"))
    assert "not a host name" in found.message


@pytest.mark.parametrize(
    ("line", "path", "wanted"),
    [
        (
            "cluster:\n  ssh: {identity_file: ~/.ssh/id_ed25519}\n",
            "cluster.ssh.identity_file",
            "/home/USER/.ssh/id_ed25519",
        ),
        ("cluster:\n  ssh: {identity_file: '~alice/.ssh/id'}\n", "cluster.ssh.identity_file", "/home/alice/.ssh/id"),
    ],
)
def test_a_tilde_path_says_it_is_not_expanded(line: str, path: str, wanted: str) -> None:
    section = line.split("\n", 1)[0] + "\n"
    text = SOLO.replace(section, line, 1)
    result = compile_text(text, "spec.yaml", render_files=False)
    (found,) = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert display_path(found.path, result.document.data) == path
    assert "'~' is not expanded" in found.message and f"write the absolute path, such as {wanted}" in found.message
    assert "docker" not in found.message


def test_a_mount_in_another_users_home_asks_for_its_absolute_path() -> None:
    # ~/ in a mount is the ssh user's home on each node (the launcher asks each node); ~bob/ is not read
    text = SOLO.replace("container:\n", "container:\n  mounts: [{host: '~bob/data', container: /data}]\n", 1)
    found = one(text)
    assert "only ~/ is read, as the home of the ssh user on each node" in found.message
    assert "write its absolute path, such as /home/bob/data" in found.message


def test_a_top_level_list_asks_for_a_mapping() -> None:
    found = one("- sparkc: 1\n- name: demo\n")
    assert found.message == "the spec must be a mapping (key: value) at the top, found a list"


@pytest.mark.parametrize(("text", "found"), [("hello\n", "text"), ("3\n", "a number"), ("", "an empty file")])
def test_other_top_levels_name_what_they_are(text: str, found: str) -> None:
    assert one(text).message == f"the spec must be a mapping (key: value) at the top, found {found}"


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("sparkc: 1\ncluster:\n\tnodes: []\n", (3, 1), "YAML indents with spaces; replace the tab at line 3"),
        ("sparkc: 1\nname:\tdemo\n", (2, 6), "YAML indents with spaces; replace the tab at line 2"),
        (
            "sparkc: 1\ncluster:\n  nodes: 1\n   x: 2\n",
            (4, 5),
            "a ':' where no key can start; is this line indented like the key above it, or should the value be "
            "in quotes?",
        ),
        (
            "sparkc: 1\ncluster:\n    nodes: 1\n  x: 2\n",
            (4, 3),
            "this line is indented less than the keys above it but more than their parent; "
            "line up keys of one mapping in the same column",
        ),
        ("a: {b: 1\nc: 2\n", (2, 2), "a '{' at line 1 is not closed; end it with '}' (items separated by ',')"),
        ("a: [1, 2\nc: 2\n", (2, 2), "a '[' at line 1 is not closed; end it with ']' (items separated by ',')"),
        ("a: 'abc\nb: 2\n", (3, 1), "a quoted text that starts at line 1 is not closed; end it with the same quote"),
        ("a: 1\n- b\n", (2, 1), "a list item ('- ') where a key was expected; indent it under its key"),
        ("a:\n  - b\n  c: 1\n", (3, 3), "a key among list items; start it with '- ' or indent it less"),
        ("a: *nope\n", (1, 4), "alias *nope names no anchor (&nope) defined above it"),
        ('a: "\\q"\n', (1, 6),
         "unknown escape '\\q' in double quotes; write '\\\\' for a backslash or use single quotes"),
        ("a: @foo\n", (1, 4), "'@' cannot start a value; put the value in quotes"),
        ("a: 1\n---\nb: 2\n", (2, 1), "a second document ('---'); a spec is one document: remove the '---' line"),
    ],
    ids=["tab", "tab-value", "over-indent", "under-indent", "flow-map", "flow-seq", "quote", "dash", "key-in-list",
         "alias", "escape", "reserved", "documents"],
)  # fmt: skip
def test_yaml_syntax_errors_are_told_in_plain_words(text: str, position: tuple[int, int], message: str) -> None:
    found = one(text)
    assert (found.line, found.column) == position
    assert found.message == f"YAML syntax error: {message}"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("name: qwen3-32b\ncluster", "name: [a, b]\ncluster"), "must be text, found a list"),
        (("  name: qwen3-32b\n", "  name: {a: 1}\n"), "must be text, found a mapping"),
        (("  name: qwen3-32b\n", "  name: ''\n"), "must not be empty"),
        (("engine:\n", "engine:\n  port: '8000'\n"),
         "must be a whole number, found text '8000'; write it without quotes"),
        (("engine:\n", "engine:\n  trust_remote_code: 'yes'\n"),
         "must be true or false, found text 'yes'; write true or false"),
        (("engine:\n", "engine:\n  env: {A: [1]}\n"), "must be text, a number or true/false, found a list"),
        (("engine:\n", "engine:\n  args: {a: 1}\n"), "must be a list, found a mapping"),
        (("container:\n", "container:\n  mounts: [/x]\n"), "must be a mapping (key: value), found text '/x'"),
        (("container:\n", "container:\n  ulimits: {1: 2}\n"), "'1' must be a limit name such as memlock or nofile"),
        (("cluster:\n  nodes:\n", "cluster:\n  nodes: []\n  x:\n"), "must list at least one"),
    ],
    ids=["list", "mapping", "empty", "quoted-number", "quoted-bool", "env-list", "args-map", "mount-text",
         "ulimit-name", "no-nodes"],
)  # fmt: skip
def test_schema_messages_name_no_internal_types(change: tuple[str, str], message: str) -> None:
    assert change[0] in SOLO
    found = [d for d in errors(SOLO.replace(*change, 1)) if not d.message.startswith("unknown key")]
    assert not _INTERNAL.search(found[0].message), found[0].message
    assert found[0].message == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("? [a]\n: 1\n", "a key must be plain text, found a list"),
        ("? \n: 1\n", "a key must be plain text, found nothing (null)"),
        ("true: 1\n", "key true is read as true/false; in quotes ('true') it is text"),
    ],
)
def test_keys_that_are_not_text_are_told_plainly(text: str, message: str) -> None:
    found = [d for d in errors(text) if d.line == 1 and "missing required" not in d.message]
    assert [d.message for d in found] == [message]


def test_a_key_with_a_newline_is_quoted_on_the_error_line() -> None:
    result = compile_text('sparkc: 1\n"bad\\nkey": 1\n', "spec.yaml", render_files=False)
    text = format_text(result.diagnostics, "spec.yaml", result.document.data)
    line = next(t for t in text.splitlines() if "unknown key" in t)
    assert line.startswith("spec.yaml:2:1: 'bad\\nkey': unknown key 'bad\\nkey'")
