"""The one way tests make and compile specs, and read what sparkc planned.

    spec = with_changes(example("solo-qwen3-32b"), {"engine.port": 9000, "cluster.nodes.0.fabric.netdev": "x"})
    result = compile_into(spec, tmp_path / "build")

Reads of Plan fields go through the small functions at the end, so a change to the plan's shape is
adapted here and nowhere else.
"""

from __future__ import annotations

import copy
import io
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ruamel.yaml import YAML

from compiler.diagnostics import format_text
from compiler.output.emit import emit
from compiler.output.render import split_runs
from compiler.pipeline import CompileResult, compile_text
from compiler.plan import NodePlan, Plan, Setting, flat

ROOT: Final = Path(__file__).resolve().parent.parent
EXAMPLES: Final = ROOT / "examples"


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Final = _Delete()  # as a value in with_changes: remove that key (if present) or list item


# -- specs ------------------------------------------------------------------------------------------


def example(name: str) -> dict[str, Any]:
    """examples/NAME (".yaml" may be left out) as plain dicts and lists."""
    path = EXAMPLES / (name if name.endswith(".yaml") else f"{name}.yaml")
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def with_changes(spec: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `spec` with each dotted key set to its value, in order.

    A number in the key indexes a list ("cluster.nodes.1.fabric.netdev"); mappings missing on the way
    are created; DELETE as the value removes the key or list item.
    """
    result = copy.deepcopy(dict(spec))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node: Any = result
        for part in parents:
            if isinstance(node, list):
                node = node[_index(node, part, dotted)]
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
            if not isinstance(node, dict | list):
                raise TypeError(f"{dotted}: {part} holds {node!r}, not a mapping or list")
        if isinstance(node, list):
            if value is DELETE:
                del node[_index(node, last, dotted)]
            else:
                node[_index(node, last, dotted)] = copy.deepcopy(value)
        elif value is DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return result


def _index(items: list[Any], part: str, dotted: str) -> int:
    if not part.isdigit() or int(part) >= len(items):
        raise KeyError(f"{dotted}: {part!r} is not an index of a list of {len(items)}")
    return int(part)


def dump(spec: Mapping[str, Any]) -> str:
    """The spec as YAML text."""
    buf = io.StringIO()
    YAML().dump(dict(spec), buf)
    return buf.getvalue()


def compile_spec(spec: Mapping[str, Any] | str, spec_path: str = "spec.yaml", **options: Any) -> CompileResult:
    """Compile a spec (a mapping, or YAML text) in memory; `options` go to compile_text."""
    text = spec if isinstance(spec, str) else dump(spec)
    return compile_text(text, spec_path, **options)


def compile_into(spec: Mapping[str, Any] | str, out_dir: Path, spec_path: str = "spec.yaml") -> CompileResult:
    """Compile a spec that must be valid and write its files into `out_dir`, as `sparkc compile -o` does."""
    result = compile_spec(spec, spec_path)
    assert result.ok, diagnostics_text(result, spec_path)
    emit(result.files, out_dir)
    return result


def diagnostics_text(result: CompileResult, spec_path: str = "spec.yaml") -> str:
    """The diagnostics as sparkc prints them, for assertion messages."""
    return format_text(result.diagnostics, spec_path, result.document.data)


# -- command lines ----------------------------------------------------------------------------------


def dry_commands(output: str, node: str) -> list[list[str]]:
    """The commands a dry run printed for `node` (`[NODE] WORDS`, continued over lines ending in ` \\`),
    as a POSIX shell reads them back."""
    commands: list[list[str]] = []
    current = ""
    for line in output.splitlines():
        if current:
            current += " " + line.strip()
        elif line.startswith(f"[{node}] "):
            current = line[len(node) + 3 :]
        else:
            continue
        if current.endswith(" \\"):
            current = current[:-2]
        else:
            commands.append(shlex.split(current))
            current = ""
    return commands


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value given to `flag`, written `FLAG VALUE` or `FLAG=VALUE`, in order."""
    values = []
    for i, word in enumerate(argv):
        if word == flag:
            assert i + 1 < len(argv), f"{flag} is the last word, without a value: {list(argv)}"
            values.append(argv[i + 1])
        elif word.startswith(flag + "="):
            values.append(word[len(flag) + 1 :])
    return values


def flag_value(argv: Sequence[str], flag: str) -> str:
    """The value of a flag given exactly once."""
    values = flag_values(argv, flag)
    assert len(values) == 1, f"{flag} given {len(values)} times, not once: {list(argv)}"
    return values[0]


def words_after(argv: Sequence[str], word: str) -> tuple[str, ...]:
    """The words after the first `word` (for instance the container's command after the image name)."""
    assert word in argv, f"{word} not in {list(argv)}"
    return tuple(argv[list(argv).index(word) + 1 :])


# -- the plan ---------------------------------------------------------------------------------------


def node_plan(plan: Plan, name: str) -> NodePlan:
    return next(n for n in plan.nodes if n.name == name)


def node_settings(plan: Plan, name: str) -> dict[str, Setting]:
    """The node's container environment, each value with its provenance."""
    return {s.name: s for s in node_plan(plan, name).env}


def node_env(plan: Plan, name: str) -> dict[str, str]:
    """The node's container environment, NAME -> value."""
    return {s.name: s.value for s in node_plan(plan, name).env}


def docker_run_words(node: NodePlan) -> tuple[str, ...]:
    """The node's whole `docker run` command line, word by word."""
    return flat(node.docker_run)


def launched_words(plan: Plan, node: NodePlan) -> tuple[str, ...]:
    """The node's `docker run` words in the order launch-cluster.sh runs them: the words every node's
    container gets, then the node's own (compiler/output/render.py's split_runs), with the label of the spec's
    sha256 that the launcher adds after `docker run -d` (deployment.sh holds the sha256, the words do not)."""
    runs = split_runs((n.docker_run for n in plan.nodes), plan.image)
    words = flat((*runs.shared, *runs.own[plan.nodes.index(node)]))
    assert words[:3] == ("docker", "run", "-d")
    return (*words[:3], "--label", f"sparkc.spec-sha256={plan.spec_sha256}", *words[3:])


def container_command(plan: Plan, name: str) -> tuple[str, ...]:
    """The words `docker run` gives the node's container after the image name."""
    return words_after(docker_run_words(node_plan(plan, name)), plan.image)


def ray_engine_words(plan: Plan) -> tuple[str, ...]:
    """The engine's command line run in the Ray head's container once Ray formed."""
    assert plan.ray_engine, "no engine is started on a Ray head in this plan"
    return flat(plan.ray_engine)
