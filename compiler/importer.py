"""`sparkc import RECIPE`: a recipe of another launcher as a sparkc spec, and what did not carry over.

Two shapes are read, both YAML: spark-vllm-docker's recipes (`recipes/*.yaml`: name, container, model,
defaults, env, command with `{placeholder}`s) and sparkrun's (the same keys plus runtime, min_nodes, ...).
The engine command's flags that sparkc manages become spec fields; the rest become engine.args. What a
recipe cannot say (the nodes' addresses, where the weights sit) is written as a marked placeholder.
"""

from __future__ import annotations

import io
import re
import shlex
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from compiler.engines.sglang import MANAGED_FLAGS as SGLANG_FLAGS
from compiler.engines.vllm import MANAGED_FLAGS as VLLM_FLAGS
from compiler.loader import load_text, to_plain
from compiler.names import SECRET_NAME

PLACEHOLDER = "PLACEHOLDER"
# Keys read into the spec; any other top-level key of the recipe is reported.
_READ = {"name", "container", "model", "runtime", "defaults", "env", "command", "min_nodes", "description"}
# Keys that describe the recipe, not the deployment: dropped without a word.
_QUIET = {"recipe_version", "sparkrun_version", "description", "metadata", "maintainer"}
# defaults: key -> (spec field, type)
_DEFAULTS = {
    "port": ("engine.port", int),
    "host": ("engine.host", str),
    "tensor_parallel": ("engine.tensor_parallel", int),
    "pipeline_parallel": ("engine.pipeline_parallel", int),
    "gpu_memory_utilization": ("engine.gpu_memory_utilization", float),
    "max_model_len": ("engine.max_model_len", int),
    "served_model_name": ("model.name", str),
}
_PROGRAMS = (("vllm", "serve"), ("python3", "-m", "sglang.launch_server"), ("python", "-m", "sglang.launch_server"))


class RecipeError(Exception):
    """The recipe cannot be read as a recipe at all."""


@dataclass(frozen=True)
class Imported:
    spec_text: str
    warnings: tuple[str, ...]  # each starts with the recipe key it is about


def import_recipe(text: str, filename: str) -> Imported:
    document, problems = load_text(text, filename)
    if problems:
        first = problems[0]
        raise RecipeError(f"{filename}:{first.line}:{first.column}: {first.message}")
    recipe = to_plain(document.data)
    if not isinstance(recipe.get("container"), str) or not isinstance(recipe.get("command", ""), str):
        raise RecipeError(f"{filename}: not a recipe: it needs 'container' (an image) and a 'command' text")
    warnings: list[str] = []
    fields: dict[str, Any] = {}
    kind = str(recipe.get("runtime") or "vllm")
    if kind not in ("vllm", "sglang"):
        raise RecipeError(f"{filename}: runtime {kind!r}: sparkc runs vllm and sglang")
    defaults = recipe.get("defaults") if isinstance(recipe.get("defaults"), dict) else {}
    for key, value in defaults.items():
        if key in _DEFAULTS:
            target, kind_of = _DEFAULTS[key]
            fields[target] = kind_of(value)
    args = _command(recipe.get("command", ""), defaults, kind, fields, warnings)
    for key in sorted(set(recipe) - _READ - _QUIET):
        warnings.append(f"{key}: not mapped; sparkc has no equivalent (review it by hand)")
    for key in sorted(set(defaults) - set(_DEFAULTS) - {"model_path"}):
        if not re.search(r"\{" + re.escape(str(key)) + r"\}", str(recipe.get("command", ""))):
            warnings.append(f"defaults.{key}: not mapped; the command does not use it")
    spec = _spec(recipe, kind, fields, args, warnings)
    out = io.StringIO()
    yaml = YAML()
    yaml.width = 200
    yaml.dump(spec, out)
    header = f"# Imported from {filename} by `sparkc import`; {PLACEHOLDER} marks what the recipe does not say.\n"
    notes = "".join(f"# warning: {w}\n" for w in warnings)
    return Imported(header + notes + out.getvalue(), tuple(warnings))


def _command(
    command: str, defaults: dict[str, Any], kind: str, fields: dict[str, Any], warnings: list[str]
) -> list[str]:
    """The engine command's flags: managed ones into `fields`, the rest returned as engine.args."""

    def fill(match: re.Match[str]) -> str:
        if match.group(1) in defaults:
            return str(defaults[match.group(1)])
        warnings.append(f"command: {{{match.group(1)}}} has no value in defaults; left as written")
        return match.group(0)

    text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", fill, command.replace("\\\n", " "))
    text = text.replace("{{", "{").replace("}}", "}")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        warnings.append(f"command: cannot be split into words ({exc}); no engine flags imported")
        return []
    for program in _PROGRAMS:
        if tuple(words[: len(program)]) == program:
            words = words[len(program) :]
            break
    else:
        if words:
            warnings.append(f"command: does not start with vllm serve or sglang.launch_server; read as {kind} flags")
    if words and not words[0].startswith("-"):
        words = words[1:]  # vllm serve's positional model: sparkc passes the mounted path
    return _flags(words, VLLM_FLAGS if kind == "vllm" else SGLANG_FLAGS, fields, warnings)


def _flags(words: list[str], managed: dict[str, str], fields: dict[str, Any], warnings: list[str]) -> list[str]:
    args: list[str] = []
    i = 0
    while i < len(words):
        flag, eq, value = words[i].partition("=")
        takes = not eq and i + 1 < len(words) and not words[i + 1].startswith("--")
        if not eq and takes:
            value, i = words[i + 1], i + 1
        i += 1
        target = managed.get(flag)
        if target is None:
            args += [flag + eq + value] if eq else ([flag, value] if takes else [flag])
        elif not _set_field(target, flag, value, fields):
            warnings.append(f"command: {flag} is set by sparkc from {target}; dropped")
    return args


def _set_field(target: str, flag: str, value: str, fields: dict[str, Any]) -> bool:
    if target == "engine.trust_remote_code":
        fields[target] = True
    elif target == "engine.backend":
        fields[target] = value
    elif target == "model.mount":
        if value.startswith("/"):
            fields[target] = value
    elif target in ("engine.port", "engine.tensor_parallel", "engine.pipeline_parallel", "engine.max_model_len"):
        fields[target] = int(value) if value.isdigit() else value
    elif target == "engine.gpu_memory_utilization":
        fields[target] = float(value) if re.fullmatch(r"[0-9.]+", value) else value
    elif target in ("engine.host", "engine.reasoning_parser", "model.name"):
        fields[target] = value
    else:
        return False
    return True


def _spec(recipe: dict[str, Any], kind: str, fields: dict[str, Any], args: list[str], warnings: list[str]) -> Any:
    model = str(recipe.get("model") or "")
    folder = model.rsplit("/", 1)[-1] or "model"
    gpus = int(fields.get("engine.tensor_parallel", 1)) * int(fields.get("engine.pipeline_parallel", 1))
    count = max(gpus, int(recipe.get("min_nodes") or 1))
    spec = CommentedMap(sparkc=1, name=_name(str(recipe.get("name") or folder)))
    spec["cluster"] = CommentedMap(nodes=[_node(i) for i in range(count)])
    container = CommentedMap(image=recipe["container"])
    env, secrets = _env(recipe.get("env"), warnings)
    if env:
        container["env"] = env
    if secrets:
        container["secrets"] = secrets
    spec["container"] = container
    spec["model"] = CommentedMap(path=f"/{PLACEHOLDER}/models/{folder}")
    spec["model"].yaml_add_eol_comment(f"{PLACEHOLDER}: where {model or 'the weights'} sit on every node", "path")
    for key in ("mount", "name"):
        if f"model.{key}" in fields:
            spec["model"][key] = fields[f"model.{key}"]
    if "name" not in spec["model"] and model:
        spec["model"]["name"] = model  # what the recipe's clients asked for: the Hugging Face id
    engine = CommentedMap(kind=kind)
    for target, value in fields.items():
        if target.startswith("engine."):
            engine[target.removeprefix("engine.")] = value
    if args:
        engine["args"] = args
    spec["engine"] = engine
    return spec


def _node(index: int) -> CommentedMap:
    """A node the recipe does not describe: every address is a marked placeholder to replace."""
    name = f"spark-{chr(ord('a') + index)}"
    node = CommentedMap(name=name)
    if index:
        node["ssh"] = f"{PLACEHOLDER}-{name}"
    node["fabric"] = CommentedMap(ip=f"192.168.100.{10 + index}", netdev="enp1s0f1np1")
    node.yaml_add_eol_comment(f"{PLACEHOLDER}: this node's CX-7 address and netdev", "fabric")
    return node


def _env(raw: Any, warnings: list[str]) -> tuple[CommentedMap, list[str]]:
    env, secrets = CommentedMap(), []
    for name, value in (raw or {}).items() if isinstance(raw, dict) else []:
        if SECRET_NAME.search(str(name).upper()):
            secrets.append(str(name))
            warnings.append(f"env.{name}: looks like a secret: listed under container.secrets (export it at launch)")
        else:
            env[str(name)] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return env, secrets


def _name(text: str) -> str:
    """A deployment name sparkc accepts: lower-case letters, digits and '-', starting with a letter, <= 40."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    name = name if name[:1].isalpha() else f"m-{name}"
    return name[:40].rstrip("-") or "imported"
