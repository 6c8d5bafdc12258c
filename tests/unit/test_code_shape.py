"""The code's shape beyond lint: engine differences live behind the engine interface (compiler/engines/), and
no module grows past what one reader takes in."""

from __future__ import annotations

import ast

from compiler.spec.typed import EngineKind
from tests.specs import ROOT

COMPILER = ROOT / "compiler"
ENGINES = COMPILER / "engines"
MAX_LINES = 500
KINDS = {kind.value for kind in EngineKind}
# Dicts outside compiler/engines/ that may have keys spelled like an engine kind, each with the reason.
KEYED_LIKE_A_KIND = {
    # Other launchers' runtime names (vllm, vllm-ray, sglang, ...), mapped to the engine kind each runs.
    ("compiler/tools/importer/recipe.py", "RUNTIMES"),
}


def engine_branches(source: str, filename: str = "<source>") -> list[str]:
    """Where the code asks which engine it is, rather than asking the engine: a member of EngineKind named
    (EngineKind.VLLM), an engine kind compared with a kind's text ("vllm" == kind, match kind: case "sglang"),
    or a dict keyed by an engine kind's text."""
    found = []
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and _names_enum(node.value) and node.attr in EngineKind.__members__:
            found.append(f"{where}: EngineKind.{node.attr}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_kind_text(s) for s in sides) and any("kind" in ast.unparse(s) for s in sides):
                found.append(f"{where}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and any(
            _kind_text(p.value) for case in node.cases for p in ast.walk(case.pattern) if isinstance(p, ast.MatchValue)
        ):
            found.append(f"{where}: match {ast.unparse(node.subject)}")
    for name, dict_node in _named_dicts(tree):
        if (filename, name) not in KEYED_LIKE_A_KIND and any(_kind_text(k) for k in dict_node.keys if k):
            found.append(f"{filename}:{dict_node.lineno}: a dict keyed by engine kind ({name or 'unnamed'})")
    return found


def _names_enum(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "EngineKind"


def _kind_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in KINDS


def _named_dicts(tree: ast.AST) -> list[tuple[str, ast.Dict]]:
    """Every dict literal, with the name it is assigned to ("" where it has none)."""
    named: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named[id(node.value)] = next((t.id for t in targets if isinstance(t, ast.Name)), "")
    return [(named.get(id(node), ""), node) for node in ast.walk(tree) if isinstance(node, ast.Dict)]


def test_the_check_finds_each_kind_of_engine_branch() -> None:
    source = """
if engine.kind is EngineKind.VLLM: pass
x = "sglang" if kind == "sglang" else "vllm"
match spec.engine.kind:
    case "trtllm": pass
FLAGS = {"vllm": 1, "sglang": 2}
"""
    found = engine_branches(source)
    assert len(found) == 4, found
    assert engine_branches("if d.engine.supports_ray and kind != other.kind: pass\nplain = {'port': 1}") == []


def test_no_engine_kind_branch_outside_the_engines() -> None:
    found = []
    for path in sorted(COMPILER.rglob("*.py")):
        if ENGINES in path.parents:
            continue
        found += engine_branches(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert not found, "ask the engine (compiler/engines/), not its kind:\n" + "\n".join(found)


def test_every_exception_is_still_there() -> None:
    for filename, name in KEYED_LIKE_A_KIND:
        tree = ast.parse((ROOT / filename).read_text(encoding="utf-8"))
        assert name in {n for n, _ in _named_dicts(tree)}, f"{filename}: {name} is gone; drop its exception"


def test_no_module_over_the_limit() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in COMPILER.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines; split them by what they read or decide: {long}"
