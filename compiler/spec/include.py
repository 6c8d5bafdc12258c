"""A spec's `cluster:` taken from a file of its own (`cluster: {file: ../cluster.yaml}`), so many specs share one.

The cluster file holds one key, `cluster:`, with the section under it: what `sparkc discover` prints.
A relative path is relative to the spec's folder; an absolute one is taken as it is. The file goes
through the same loader (limits, positions) as a spec, and every problem inside it is reported at
that file's line and column. One level only: a cluster file cannot name another.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path as FilePath

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from compiler.diagnostics import Diagnostic, Path, Severity
from compiler.spec.load import Document, SpecReadError, load_text, locate, read_spec

KEY = "file"
# Beside `file`: the names of the file's nodes this deployment runs on (a small model beside a big one).
NODES = "nodes"


@dataclass(frozen=True)
class ClusterFile:
    path: str  # as shown to the user in diagnostics: the spec's folder joined with what it says
    sha256: str
    document: Document  # data: {cluster: {...}} with the positions of the cluster file
    recorded: str  # as the generated files name it: what the spec says, normalized (the same from any folder)


def wants_file(data: object) -> bool:
    return isinstance(data, CommentedMap) and isinstance(data.get("cluster"), CommentedMap) and KEY in data["cluster"]


def include(spec: Document) -> tuple[ClusterFile | None, list[Diagnostic]]:
    """Read the cluster file a spec names and put its section in place of `cluster: {file: ...}` (in `spec.data`).

    Problems with the reference itself point at the spec; problems inside the file point at the file.
    """
    section = spec.data["cluster"]
    problems = [
        _at_spec(
            spec, ("cluster", key), f"with cluster.{KEY} the whole section comes from that file; move '{key}' there"
        )
        for key in section
        if key not in (KEY, NODES)
    ]
    name = section[KEY]
    where = ("cluster", KEY)
    if not isinstance(name, str) or not name.strip():
        return None, [*problems, _at_spec(spec, where, "must be the path of a cluster file (relative to this spec)")]
    if name.startswith("~"):
        message = f"'{name}': '~' is not expanded here; write the path relative to this spec, or an absolute path"
        return None, [*problems, _at_spec(spec, where, message)]
    shown = name if FilePath(name).is_absolute() else os.path.normpath(FilePath(spec.filename).parent / name)
    try:
        text = read_spec(FilePath(shown))  # a regular file only: a folder, pipe or device is refused
    except SpecReadError as exc:
        message = f"cannot read the cluster file: {exc}" + (
            f" (it is '{name}' relative to this spec)" if name != shown else ""
        )
        return None, [*problems, _at_spec(spec, where, message)]
    document, loaded = load_text(text, shown)
    problems += [replace(d, file=shown) for d in loaded]
    if document.data is None or not isinstance(document.data, CommentedMap):
        return None, problems
    problems += _shape(document, shown)
    if not problems and NODES in section:
        problems += _select(spec, section[NODES], document.data["cluster"])
    if problems:
        return None, problems
    spec.data["cluster"] = document.data["cluster"]
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return ClusterFile(shown, sha256, document, os.path.normpath(name)), []


def _select(spec: Document, wanted: object, cluster: CommentedMap) -> list[Diagnostic]:
    """Keep only the nodes the spec names (in the file's order, positions kept), and the file's head if kept."""
    where: Path = ("cluster", NODES)
    nodes = cluster.get("nodes")
    if not isinstance(nodes, CommentedSeq):
        return []  # the schema reports the file's nodes
    names = [n.get("name") for n in nodes if isinstance(n, CommentedMap)]
    if not isinstance(wanted, list) or not wanted or not all(isinstance(w, str) for w in wanted):
        return [_at_spec(spec, where, "must be a list of node names of the cluster file, e.g. [spark-a]")]
    problems = _unknown_names(spec, wanted, [str(n) for n in names])
    if problems:
        return problems
    kept = CommentedSeq()
    kept._yaml_set_line_col(nodes.lc.line, nodes.lc.col)
    for old, node in enumerate(nodes):
        if isinstance(node, CommentedMap) and node.get("name") in wanted:
            if nodes.lc.data and old in nodes.lc.data:
                kept.lc.add_idx_line_col(len(kept), nodes.lc.data[old])
            kept.append(node)
    cluster["nodes"] = kept
    if cluster.get("head") not in wanted:
        cluster.pop("head", None)
    return []


def _unknown_names(spec: Document, wanted: list[str], names: list[str]) -> list[Diagnostic]:
    problems = []
    for i, name in enumerate(wanted):
        if name not in names:
            message = f"{name!r} is not a node of the cluster file (it has: {', '.join(names)})"
            problems.append(_at_spec(spec, ("cluster", NODES, i), message))
        elif name in wanted[:i]:
            problems.append(_at_spec(spec, ("cluster", NODES, i), f"{name!r} is named twice"))
    return problems


def _shape(document: Document, shown: str) -> list[Diagnostic]:
    data = document.data
    extra = [key for key in data if key != "cluster"]
    if "cluster" not in data:
        message = "a cluster file holds one key, 'cluster:', with the section under it (as sparkc discover prints it)"
        return [_in_file(document, shown, (), message)]
    problems = [
        _in_file(document, shown, (key,), "a cluster file holds only 'cluster:'; this belongs in the spec", at_key=True)
        for key in extra
    ]
    section = data["cluster"]
    if not isinstance(section, CommentedMap):
        problems.append(_in_file(document, shown, ("cluster",), "must be a mapping (ssh, head, topology, nodes)"))
    elif KEY in section:
        message = "a cluster file cannot name another cluster file; write the section here"
        problems.append(_in_file(document, shown, ("cluster", KEY), message, at_key=True))
    return problems


def _at_spec(spec: Document, path: Path, message: str) -> Diagnostic:
    line, column = locate(spec.data, path)
    return Diagnostic(path, message, Severity.ERROR, line, column, True)


def _in_file(document: Document, shown: str, path: Path, message: str, at_key: bool = False) -> Diagnostic:
    line, column = locate(document.data, path, at_key=at_key)
    return Diagnostic(path, message, Severity.ERROR, line, column, True, file=shown)


def place(diagnostic: Diagnostic, cluster: ClusterFile | None) -> Diagnostic:
    """A diagnostic about the cluster section, at its position in the cluster file."""
    if cluster is None or diagnostic.fixed_position or diagnostic.path[:1] != ("cluster",):
        return diagnostic
    line, column = locate(cluster.document.data, diagnostic.path, at_key=diagnostic.at_key)
    return replace(diagnostic, line=line, column=column, fixed_position=True, file=cluster.path)
