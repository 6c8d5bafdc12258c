"""Hostile and odd input: every one ends in a clear message with a position, never a hang or "a bug in sparkc"."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path

import pytest

from compiler.cli.main import main
from compiler.diagnostics import Diagnostic, Severity
from compiler.pipeline import compile_text
from compiler.spec.load import MAX_ALIAS_EXPANSION, MAX_DEPTH, MAX_SPEC_BYTES, to_plain
from compiler.spec.schema import load_schema, validate
from tests.product import PACKAGE_HOME
from tests.specs import EXAMPLES, ROOT

SOLO = (EXAMPLES / "solo-qwen3-32b.yaml").read_text(encoding="utf-8")
TWO_NODES = (
    (EXAMPLES / "invalid" / "layout-mismatch.yaml")
    .read_text(encoding="utf-8")
    # a fraction vLLM can start with, so that its start check's warning is not among the findings
    .replace("tensor_parallel: 3", "tensor_parallel: 2\n  gpu_memory_utilization: 0.8")
)


def errors(text: str, render_files: bool = False) -> list[Diagnostic]:
    result = compile_text(text, "spec.yaml", render_files=render_files)
    return [d for d in result.diagnostics if d.severity is Severity.ERROR]


def only_error(text: str, render_files: bool = False) -> Diagnostic:
    (found,) = errors(text, render_files)
    assert found.line > 0 and found.column > 0, found
    return found


def with_line(text: str, after: str, line: str) -> str:
    """`text` with `line` inserted right after the line `after`."""
    assert after + "\n" in text
    return text.replace(after + "\n", f"{after}\n{line}\n", 1)


# -- limits of the YAML loader -----------------------------------------------------------------------------------------


def test_alias_bomb_is_refused_at_the_alias() -> None:
    # 12 x 12 x 12 x 12 = 20736 values from a few lines: past the budget, yet small enough not to hang before it.
    rows = ["a: &a [x, x, x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abc", "bcd", strict=True):
        rows.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 12)}]")
    bomb = SOLO + "\n".join(rows) + "\n"
    found = only_error(bomb)
    assert f"aliases (*name) expand to more than {MAX_ALIAS_EXPANSION} values" in found.message
    assert found.line == SOLO.count("\n") + 4  # in row d, where the total passes the budget


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    found = only_error(SOLO + "x: &loop [1, *loop]\n")
    assert "alias *loop is inside the value it names" in found.message
    assert (found.line, found.column) == (SOLO.count("\n") + 1, 14)


def test_aliases_within_the_budget_still_work() -> None:
    shared = TWO_NODES.replace("      ssh: spark-a.local\n", "      ssh: spark-a.local\n      env: &env {A: '1'}\n")
    shared = shared.replace("      ssh: spark-b.local\n", "      ssh: spark-b.local\n      env: *env\n")
    result = compile_text(shared, "spec.yaml", render_files=False)
    assert result.ok, result.diagnostics


def test_deep_nesting_is_refused_with_its_position() -> None:
    found = only_error(SOLO + "x: " + "[" * 20000 + "]" * 20000 + "\n")
    assert f"nested deeper than {MAX_DEPTH} levels" in found.message
    assert found.line == SOLO.count("\n") + 1


def test_nesting_through_an_alias_counts_too() -> None:
    half = MAX_DEPTH // 2 + 1
    deep = "[" * half + "]" * half
    found = only_error(SOLO + f"x: &deep {deep}\ny: {'[' * half}*deep{']' * half}\n")
    assert "alias *deep nests the spec deeper than" in found.message


def test_a_string_larger_than_the_limit_is_refused() -> None:
    found = only_error(SOLO + "#" * MAX_SPEC_BYTES + "\n")
    assert "larger than 1 MiB" in found.message


def test_a_file_larger_than_the_limit_is_refused_before_parsing(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text(SOLO + "#" * MAX_SPEC_BYTES + "\n", encoding="utf-8")
    assert main(["validate", str(spec)]) == 2
    assert f"{spec}: larger than 1 MiB" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_an_endless_file_is_never_read(capsys) -> None:
    assert main(["validate", "/dev/zero"]) == 2  # a device: refused before a byte is read
    assert "/dev/zero: a device, not a plain file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("char", "code"), [("\x00", "U+0000"), ("\x1b", "U+001B"), ("\x7f", "U+007F"), ("\ufffe", "U+FFFE")]
)
def test_a_character_yaml_forbids_is_a_yaml_error_with_its_position(char: str, code: str) -> None:
    text = SOLO.replace("name: qwen3-32b\n", f"name: qwen3-{char}32b\n", 1)
    found = only_error(text)
    assert f"character {code} is not allowed in YAML" in found.message
    assert (found.line, found.column) == (4, 13)


def test_forbidden_characters_are_counted_not_listed() -> None:
    found = only_error(SOLO + "#" + "\x00" * 500 + "\n")
    assert "U+0000 is not allowed in YAML (and 499 more)" in found.message


def test_a_file_that_is_not_utf8_names_the_position(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(SOLO.replace("aurora", "aur\xf6ra").encode("latin-1"))
    assert main(["validate", str(spec)]) == 2
    assert f"{spec}:12:18: not UTF-8 text" in capsys.readouterr().err


def test_a_lone_surrogate_escape_is_an_error_not_a_crash() -> None:
    # It reached the generated scripts, which cannot be written as UTF-8: exit 3 before.
    text = SOLO.replace("  name: qwen3-32b", '  name: "qwen\\ud800"')
    found = only_error(text, render_files=True)
    assert '"\\ud800" is half of a UTF-16 surrogate pair' in found.message
    assert (found.line, found.column) == (13, 9)


def test_a_surrogate_pair_escape_names_the_escape_to_write() -> None:
    found = only_error(SOLO.replace("  name: qwen3-32b", '  name: "qwen\\ud83d\\ude00"'))
    assert "write \\U0001f600 or the character itself" in found.message


def test_a_merged_key_is_located_at_its_parent() -> None:
    text = SOLO.replace("container:\n", "container:\n  <<: {privileged: 3}\n", 1)
    assert [(d.path, d.message, d.line, d.column) for d in errors(text)] == [
        (("container", "privileged"), "must be true or false, found the number 3", 9, 1)
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!int abc", "tag !!int is not supported in a spec"),  # ruamel's int() raised: exit 3 before
        ("!!float abc", "tag !!float is not supported in a spec"),
        ("!!str x", "tag !!str is not supported in a spec"),
        ("!!python/object:os.system {}", "tag !!python/object:os.system is not supported in a spec"),
        ("!custom x", "tag !custom is not supported in a spec"),
        ("!!omap [a: 1]", "tag !!omap is not supported in a spec"),  # its keys had no position: exit 3 before
        ("2024-13-45", "cannot read 2024-13-45 (month must be in 1..12); in quotes it is text"),
        ("1" * 5000, "a number of more than 100 characters"),  # past Python's 4300 digits: exit 3 before
    ],
    ids=["int-tag", "float-tag", "str-tag", "python-tag", "custom-tag", "omap-tag", "bad-date", "long-number"],
)
def test_values_ruamel_cannot_convert_are_errors_at_their_position(value: str, message: str) -> None:
    found = only_error(SOLO.replace("  name: qwen3-32b", f"  name: {value}"))
    assert message in found.message
    assert (found.line, found.column) == (13, 9)


def test_a_date_where_text_is_wanted_says_so() -> None:
    found = only_error(SOLO.replace("  name: qwen3-32b", "  name: 2024-01-01"))
    assert found.message == "2024-01-01 is read as a date; in quotes ('2024-01-01') it is text"


def test_yaml_library_warnings_stay_out_of_the_output() -> None:
    # A reused anchor is valid YAML; ruamel's warning about it used to reach stderr as a Python warning.
    text = SOLO.replace("name: qwen3-32b\n", "name: &n qwen3-32b\n", 1).replace("  name: qwen3-32b", "  name: &n x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compile_text(text, "spec.yaml", render_files=False)
    assert result.ok, result.diagnostics
    assert [str(w.message) for w in caught] == []


# -- numbers -----------------------------------------------------------------------------------------------------------


ENGINE, CONTAINER, END = "  kind: vllm", "  image: vllm/vllm-openai:v0.11.2", "  reasoning_parser: qwen3"
NODE = "      fabric: {ip: 192.168.100.10, netdev: enp1s0f1np1}"


@pytest.mark.parametrize(
    ("after", "line", "path", "message"),
    [
        (ENGINE, "  port: 8000.0", ("engine", "port"), "8000.0 is not a whole number; write 8000"),
        (ENGINE, "  tensor_parallel: 1.0", ("engine", "tensor_parallel"), "1.0 is not a whole number; write 1"),
        (
            END,
            "launch: {ray_object_store_memory: 2.5e9}",
            ("launch", "ray_object_store_memory"),
            "2500000000.0 is not a whole number; write 2500000000",
        ),
        (ENGINE, "  pipeline_parallel: 1000.5", ("engine", "pipeline_parallel"), "1000.5 is not a whole number"),
        (ENGINE, "  pipeline_parallel: true", ("engine", "pipeline_parallel"), "must be a whole number, found true"),
        (END, "launch: {timeout: 3600.0}", ("launch", "timeout"), "3600.0 is not a whole number; write 3600"),
        (NODE, "      gpus: 1.0", ("cluster", "nodes", 0, "gpus"), "1.0 is not a whole number; write 1"),
        (
            CONTAINER,
            "  ulimits: {memlock: 1.0}",
            ("container", "ulimits", "memlock"),
            "1.0 is not a whole number; write 1",
        ),
        (
            CONTAINER,
            "  env: {FOO: .inf}",
            ("container", "env", "FOO"),
            ".inf is not a finite number; in quotes ('.inf') it is text",
        ),
    ],
)
def test_whole_numbers_must_be_yaml_integers(after: str, line: str, path: tuple, message: str) -> None:
    found = only_error(with_line(SOLO, after, line))
    assert (found.path, found.message) == (path, message)


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "1e400"])
def test_no_number_may_be_nan_or_infinite(value: str) -> None:
    found = only_error(SOLO.replace("gpu_memory_utilization: 0.7", f"gpu_memory_utilization: {value}"))
    assert found.path == ("engine", "gpu_memory_utilization")
    assert found.message.endswith("is not a finite number")


def test_the_format_version_is_a_whole_number_too() -> None:
    assert only_error(SOLO.replace("sparkc: 1", "sparkc: 1.0")).message == "1.0 is not a whole number; write 1"


def test_integers_in_any_yaml_spelling_are_accepted() -> None:
    text = with_line(SOLO, "  kind: vllm", "  port: 0x1f90\n  tensor_parallel: +1")
    text = text.replace("max_model_len: 16384", "max_model_len: 16_384").replace("0.7", "1")
    result = compile_text(text, "spec.yaml", render_files=True)
    assert result.ok, result.diagnostics
    launcher = result.files["deployment.sh"]
    assert "--port 8080" in launcher and "--tensor-parallel-size 1" in launcher and "16384" in launcher


def test_a_float_where_a_whole_number_is_wanted_is_one_error_not_two() -> None:
    found = errors(SOLO + "launch: {timeout: 10.0}\n")
    assert [d.message for d in found] == ["10.0 is not a whole number; write 10"]


# -- every problem in one run ------------------------------------------------------------------------------------------


def test_cross_field_errors_are_reported_beside_schema_errors() -> None:
    text = TWO_NODES.replace("ip: 192.168.100.11", "ip: spark-b.fabric").replace(
        "tensor_parallel: 2", "tensor_parallel: 4"
    )
    text += "launch: {timeout: 10}\n"
    messages = {d.path: d.message for d in errors(text)}
    assert messages.keys() == {
        ("launch", "timeout"),
        ("cluster", "nodes", 1, "fabric", "ip"),
        ("engine", "tensor_parallel"),
    }
    assert "is not an IP address" in messages[("cluster", "nodes", 1, "fabric", "ip")]
    assert "4 x 1 = 4, but the nodes have 2 GPUs" in messages[("engine", "tensor_parallel")]


def nodes_with(line: str) -> str:
    """TWO_NODES with `line` in both nodes."""
    return TWO_NODES.replace(".local\n", f".local\n{line}\n")


LAYOUT, IP, PORTS = ("engine", "tensor_parallel"), ("cluster", "nodes", 1, "fabric", "ip"), ("launch", "ray_port")


@pytest.mark.parametrize(
    ("text", "findings"),
    [
        # A whole number written as a float is checked as the number it says: 2 + 2 GPUs are not 8, they are 4.
        (nodes_with("      gpus: 2.0").replace("tensor_parallel: 2", "tensor_parallel: 8"), {LAYOUT}),
        (nodes_with("      gpus: 2.0").replace("tensor_parallel: 2", "tensor_parallel: 4"), set()),
        # A refused value stands in as its default: rules that depend on it say nothing (1 + 1 GPUs are not 4).
        (nodes_with("      gpus: 0").replace("tensor_parallel: 2", "tensor_parallel: 4"), set()),
        (nodes_with("      gpu: 2").replace("tensor_parallel: 2", "tensor_parallel: 4"), set()),
        (TWO_NODES.replace("tensor_parallel: 2", "tensor_parallel: 1\n  pipeline_parallel: '2'"), set()),
        (TWO_NODES.replace("kind: vllm", "kind: vllm\n  backend: rya") + "launch: {ray_port: 8000}\n", set()),
        (TWO_NODES.replace("kind: vllm", "kind: vllm\n  port: 'x'") + "launch: {ray_port: 8000}\n", set()),
        (TWO_NODES.replace("kind: vllm", "kind: vllm\n  port: 6379") + "lanch: {ray_port: 9000}\n", set()),
        # ... and rules that do not depend on it still speak.
        (TWO_NODES + "launch: {ray_port: 8000, timeout: 1.5}\n", {PORTS}),
        (
            TWO_NODES.replace("kind: vllm", "kind: vllm\n  port: 'x'")
            .replace("tensor_parallel: 2", "tensor_parallel: 4")
            .replace("ip: 192.168.100.11", "ip: x"),
            {LAYOUT, IP},
        ),
    ],
    ids=[
        "float-gpus-mismatch",
        "float-gpus-match",
        "gpus-0",
        "unknown-key",
        "pp-string",
        "backend-typo",
        "port-string",
        "section-typo",
        "timeout-float",
        "port-string-beside-layout-and-ip",
    ],
)
def test_rules_beside_schema_errors_speak_only_when_no_guess_decides(text: str, findings: set) -> None:
    result = compile_text(text, "spec.yaml", render_files=False)
    schema_errors = {(d.path, d.message) for d in validate(to_plain(result.document.data), load_schema())}
    assert schema_errors, "each case has a schema error"
    found = {d.path for d in result.diagnostics if (d.path, d.message) not in schema_errors}
    assert found == findings


def test_a_refused_required_value_leaves_only_the_schema_errors() -> None:
    text = TWO_NODES.replace("ip: 192.168.100.11", "ip: 11").replace("name: demo", "name: Demo")
    assert {d.path for d in errors(text)} == {("name",), ("cluster", "nodes", 1, "fabric", "ip")}


# -- Ctrl-C ------------------------------------------------------------------------------------------------------------

# Sends the process a real SIGINT at a fixed point while the command line's modules are still importing.
INTERRUPT_DURING_IMPORTS = textwrap.dedent("""
    import importlib, importlib.abc, os, runpy, signal, sys

    class Interrupt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "ruamel.yaml":
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, Interrupt())
    sys.argv = ["sparkc", "validate", sys.argv[2]]
    if sys.argv[1] == "-m":
        runpy.run_module("compiler", run_name="__main__", alter_sys=True)
    else:
        module, attr = {entry!r}.split(":")
        sys.exit(getattr(importlib.import_module(module), attr)())
""")


@pytest.mark.parametrize("how", ["console-script", "-m"])
def test_ctrl_c_while_modules_import_is_a_clean_interrupt(how: str, tmp_path: Path) -> None:
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["sparkc"]
    script = INTERRUPT_DURING_IMPORTS.format(entry=entry)
    result = subprocess.run(
        [sys.executable, "-c", script, how, str(EXAMPLES / "solo-qwen3-32b.yaml")],
        capture_output=True,
        text=True,
        cwd=PACKAGE_HOME,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},  # no earlier validation answers: it imports
    )
    assert (result.returncode, result.stderr, result.stdout) == (130, "interrupted\n", "")
