"""Script shapes known clean when this sparkc was made, so that the first compile after installing it need
not shellcheck them (the launch script's shape alone is about 1.7 s of one core).

A shape (compiler/layout.py) is the same text for every spec of the same nodes and options. The shapes of
the examples, as written and with 3 and 4 nodes, were checked with the shellcheck named in the file's first
line, with lint's flags, and the file lists the digest of each clean one. A shape whose digest is listed
counts as clean only under that same shellcheck version; any other shape, or another version, is checked as
before. The tests check every listed shape again and refuse a list that is out of date.

Regenerate after changing a template or the library (about a minute):

    python -m compiler.shipped_shapes
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.lint import Check

LIST = Path(__file__).resolve().parent / "clean_shapes.txt"
_HEADER = "# shapes found clean by shellcheck "


@cache
def _listed() -> tuple[str, frozenset[str]]:
    """The shellcheck version the list was made with, and its digests; nothing where it cannot be read."""
    try:
        lines = LIST.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return "", frozenset()
    if not lines or not lines[0].startswith(_HEADER):
        return "", frozenset()
    version = lines[0].removeprefix(_HEADER).strip()
    return version, frozenset(line for line in lines[1:] if line and not line.startswith("#"))


@cache
def shellcheck_version(shellcheck: str) -> str:
    """`0.11.0`, from `shellcheck --version`; empty where it cannot be told."""
    try:
        out = subprocess.run([shellcheck, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in out.splitlines():
        if line.startswith("version:"):
            return line.removeprefix("version:").strip()
    return ""


def known_clean(digest: str, shellcheck: str) -> bool:
    version, digests = _listed()
    # The version is asked only for a listed shape: a shape that is not listed costs no process.
    return digest in digests and bool(version) and shellcheck_version(shellcheck) == version


def write_list(digests: set[str], version: str) -> None:
    body = "".join(f"{d}\n" for d in sorted(digests))
    LIST.write_text(f"{_HEADER}{version}\n# regenerate: python -m compiler.shipped_shapes\n{body}", encoding="utf-8")


def _specs(examples: Path) -> Iterator[tuple[str, str]]:
    """(name, text) of each example, and of each with 3 and with 4 nodes where its nodes are in the spec: the
    cluster sizes people run most (a size it cannot take, for its parallelism, is left out)."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    for spec in sorted(examples.glob("*.yaml")):
        text = spec.read_text(encoding="utf-8")
        yield spec.name, text
        data = yaml.load(text)
        nodes = data.get("cluster", {}).get("nodes")
        if not isinstance(nodes, list) or len(nodes) != 2 or data["engine"].get("tensor_parallel") != 2:
            continue
        for count in (3, 4):
            extra = []
            for i in range(2, count):
                node = yaml.load(_other_addresses(dump(yaml, nodes[-1]), 10 * i))
                node["name"] = f"{node['name']}-{i}"
                node["ssh"] = f"{i}-{node['ssh']}" if isinstance(node.get("ssh"), str) else node.get("ssh")
                extra.append(node)
            variant = {**data, "cluster": {**data["cluster"], "nodes": [*nodes, *extra]}}
            variant["engine"] = {**data["engine"], "tensor_parallel": count}
            yield f"{spec.name} with {count} nodes", dump(yaml, variant)


def _other_addresses(text: str, by: int) -> str:
    """`text` with the last number of each IPv4 address raised by `by`: another node's addresses."""
    import re

    return re.sub(r"(\d+\.\d+\.\d+\.)(\d+)", lambda m: f"{m[1]}{int(m[2]) + by}", text)


def dump(yaml: Any, data: Any) -> str:
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def example_shapes(examples: Path) -> Iterator[tuple[str, dict[str, str], list[Check]]]:
    """For each spec of _specs that compiles: its name, its scripts and their shape checks."""
    from compiler.lint import shape_checks
    from compiler.pipeline import Beside, compile_text

    for name, text in _specs(examples):
        result = compile_text(text, str(examples / name.split(" ")[0]), lint=False, beside=Beside(spec_dir=examples))
        if result.plan is None:
            print(f"left out: {name} (does not compile)")
            continue
        files = {file: body for file, body in result.files.items() if "/" not in file}  # not a patch folder's
        yield name, files, shape_checks(files, result.plan)


def check_afresh(examples: Path) -> tuple[set[str], list[str]]:
    """Every distinct shape of the examples checked by shellcheck, no cache: their keys, and the findings."""
    from compiler.lint import unclean

    digests: set[str] = set()
    findings: list[str] = []
    for name, files, checks in example_shapes(examples):
        new = [c for c in checks if c.shipped_key not in digests]
        findings += [f"{name}: {line}" for line in unclean(new, files)] if new else []
        digests |= {c.shipped_key for c in checks}
    return digests, findings


def _main() -> None:
    """Check the shapes of every example afresh and write the list of them (run in a source checkout)."""
    from compiler.lint import shellcheck_binary

    digests, findings = check_afresh(Path(__file__).resolve().parent.parent / "examples")
    if findings:
        raise SystemExit("shapes with findings; nothing written:\n" + "\n".join(findings))
    write_list(digests, shellcheck_version(shellcheck_binary()))
    print(f"{LIST.name}: {len(digests)} shapes")


if __name__ == "__main__":
    _main()
