"""A recipe's YAML shape: which keys are read, which runtime runs it, its defaults as typed spec fields. The
command, speculative decoding, the image's mods and the spec's text each have a module of their own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path as FilePath
from typing import Any

from compiler.diagnostics import printable
from compiler.engines import Engine, engine_for
from compiler.spec.load import kind_of, load_text, to_plain
from compiler.tools.importer.build_args import build_from_args
from compiler.tools.importer.command import ENGINE_DECIDES, default_command, read_command, recipe_words
from compiler.tools.importer.mods import mods, pre_exec
from compiler.tools.importer.output import Imported, Notes, RecipeError, imported, shown, typed, write_spec

# Keys read into the spec; any other top-level key of the recipe is reported.
_READ = {
    *("name", "container", "model", "model_revision", "runtime", "defaults", "env", "command", "min_nodes"),
    *("description", "volumes"),
}
# Keys that describe the recipe, not the deployment: dropped without a word.
_QUIET = {"recipe_version", "sparkrun_version", "description", "metadata", "maintainer"}
# Keys about how many nodes the recipe's launcher may use: a spec names its nodes, so nothing is lost.
_NODE_COUNT = {"solo_only", "cluster_only", "max_nodes", "solo"}
# Keys read by their own step (what the image needs before it runs).
_IMAGE_STEPS = {"build_args", "mods", "pre_exec", "executor_config"}
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
_WHAT = {int: "a whole number", float: "a number", str: "text"}
# The runtime names of sparkrun and spark-vllm-docker -> the engine kind, and how its launcher forms a group of
# nodes (None: as the command says, else _unnamed_runtime). sparkrun's vllm-distributed runs vLLM's own
# --nnodes mode; vllm-ray, eugr-vllm (a vllm-ray with eugr's builds) and eugr-vllm-ray start Ray first;
# SGLang always forms its own group.
RUNTIMES: dict[str, tuple[str, str | None]] = {
    "vllm": ("vllm", None),
    "eugr-vllm": ("vllm", "ray"),
    "vllm-ray": ("vllm", "ray"),
    "eugr-vllm-ray": ("vllm", "ray"),
    "vllm-distributed": ("vllm", "native"),
    "sglang": ("sglang", None),
}


def import_recipe(
    text: str, filename: str, recipes_dir: FilePath | None = None, patches: str | None = None
) -> Imported:
    """`recipes_dir`: the recipe's repository, where its mods are read; `patches`: the folder, relative to
    the spec's, that their files are written into (None: the spec goes to stdout, so they cannot be)."""
    document, problems = load_text(text, filename)
    if problems:
        first = problems[0]
        raise RecipeError(f"{filename}:{first.line}:{first.column}: {first.message}")
    recipe = to_plain(document.data)
    if not isinstance(recipe.get("container"), str) or not isinstance(recipe.get("command", ""), str):
        raise RecipeError(f"{filename}: not a recipe: it needs 'container' (an image) and a 'command' text")
    warnings = Notes()
    fields: dict[str, Any] = {}
    runtime = str(recipe.get("runtime") or "vllm")
    if runtime not in RUNTIMES:
        known = ", ".join(sorted(RUNTIMES))
        raise RecipeError(f"{printable(filename)}: runtime {printable(repr(runtime))}: sparkc runs {known}")
    kind, backend = RUNTIMES[runtime]
    engine = engine_for(kind)
    defaults = _defaults(recipe.get("defaults"), fields, warnings, engine)
    command = recipe.get("command") or default_command(engine, defaults)
    # sparkrun fills `{model}` with the recipe's model (the Hub id); a `defaults.model` wins.
    # One word, whatever it holds (a Hub id has no spaces; a hostile one must not become several flags).
    model = recipe.get("model")
    values = {"model": shlex.quote(model), **defaults} if isinstance(model, str) else defaults
    # spark-vllm-docker's launcher formats the command, so its recipes write a JSON brace as {{ }}; sparkrun's
    # recipes (they name a runtime) are filled without that, and '{"a": {"b": 1}}' ends in a real }}.
    args = read_command(command, values, engine, fields, warnings, unescape="runtime" not in recipe)
    if backend is not None:
        fields["engine.backend"] = backend  # how the recipe's own launcher runs it, whatever the command says
    elif engine.supports_ray and "engine.backend" not in fields and _several_gpus(fields):
        fields["engine.backend"] = _unnamed_runtime(recipe, defaults)
    _revision(recipe.get("model_revision"), fields, warnings)
    _executor(recipe.get("executor_config"), fields, warnings)
    build_from_args(recipe, fields, warnings)
    files = mods(recipe, args, fields, warnings, recipes_dir, patches)
    before = pre_exec(recipe, values, warnings)
    if before:  # sparkrun runs the recipe's own pre_exec first, then its mods'
        hooks = fields.setdefault("container.hooks", {"pre_engine": []})
        hooks["pre_engine"] = before + hooks["pre_engine"]
    for key in sorted(set(recipe) - _READ - _QUIET - _NODE_COUNT - _IMAGE_STEPS, key=str):
        warnings.add((key,), "not mapped; sparkc has no equivalent (review it by hand)", at_key=True)
    switches = set() if recipe.get("command") else set(recipe_words(engine).default_switches)
    steps = recipe.get("pre_exec") if isinstance(recipe.get("pre_exec"), list) else [recipe.get("pre_exec")]
    uses = " ".join([command, *(s for s in steps if isinstance(s, str))])  # where a `{key}` is filled
    for key in sorted(set(defaults) - set(_DEFAULTS) - {"model_path"} - switches, key=str):
        if not re.search(r"\{" + re.escape(str(key)) + r"\}", uses):
            warnings.add(("defaults", key), "not mapped; the command does not use it", at_key=True)
    spec = write_spec(recipe, kind, fields, args, warnings)
    return imported(document.data, filename, spec, warnings, files)


def _revision(raw: Any, fields: dict[str, Any], warnings: Notes) -> None:
    """sparkrun's model_revision, the snapshot of the weights the recipe serves: model.revision, which the
    launcher checks on every node."""
    if isinstance(raw, str) and raw.strip():
        fields["model.revision"] = raw.strip()
    elif raw is not None:
        warnings.add(("model_revision",), f"{kind_of(raw)}, not a commit id, branch or tag; set model.revision by hand")


def _executor(raw: Any, fields: dict[str, Any], warnings: Notes) -> None:
    """sparkrun's executor_config: how its launcher runs each container. An empty entrypoint runs the command in
    place of the image's: sparkc's bypass. shm_size loses nothing: sparkc runs the containers with --ipc host,
    so /dev/shm is the host's. Anything else is named."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        warnings.add(("executor_config",), f"{kind_of(raw)}, not a mapping; ignored")
        return
    for key, value in raw.items():
        if key == "entrypoint" and value == "":
            fields["container.entrypoint"] = "bypass"
        elif key != "shm_size":
            warnings.add(
                ("executor_config", key), "not mapped; sparkc has no equivalent (review it by hand)", at_key=True
            )


def _several_gpus(fields: dict[str, Any]) -> bool:
    """Whether the parallelism read so far spans nodes (a DGX Spark has one GPU): only then does a backend matter."""
    keys = ("engine.tensor_parallel", "engine.pipeline_parallel", "engine.data_parallel")
    return any(isinstance(fields.get(k), int) and fields[k] > 1 for k in keys)


def _unnamed_runtime(recipe: dict[str, Any], defaults: dict[Any, Any]) -> str:
    """How the launcher runs vLLM on several nodes where neither the runtime's name nor the command says.
    spark-vllm-docker's own recipes (recipe_version 1, no runtime) go to its launch-cluster.sh, which always
    starts a Ray cluster; sparkrun runs a bare `vllm` runtime as vllm-distributed (vLLM's own --nnodes mode)
    unless its defaults ask for Ray."""
    if "runtime" not in recipe and str(recipe.get("recipe_version", "")) == "1":
        return "ray"
    return "ray" if str(defaults.get("distributed_executor_backend", "")).lower() == "ray" else "native"


def _defaults(raw: Any, fields: dict[str, Any], warnings: Notes, engine: Engine) -> dict[Any, Any]:
    """The recipe's defaults; those that are spec fields, typed, into `fields`."""
    if not isinstance(raw, dict):
        if raw is not None:
            warnings.add(("defaults",), f"{kind_of(raw)}, not a mapping of values; ignored")
        return {}
    for key, value in raw.items():
        if key == "max_model_len" and isinstance(value, str) and value.strip() == engine.context_fits_memory:
            fields["engine.max_model_len"] = value.strip()  # fit to the KV cache at start, as the engine says
        elif key in _DEFAULTS and isinstance(value, str) and value.strip().lower() in ENGINE_DECIDES:
            warnings.add(("defaults", key), f"{value!r}: left to the engine (its default applies)")
        elif key in _DEFAULTS:
            target, type_of = _DEFAULTS[key]
            value_typed = typed(value, type_of)
            if value_typed is None:
                warnings.add(
                    ("defaults", key), f"{shown(value)} is not {_WHAT[type_of]}; left out: set {target} by hand"
                )
            else:
                fields[target] = value_typed
    return raw
