"""`sparkc import RECIPE`: a recipe of another launcher as a sparkc spec, and what did not carry over.

Two shapes are read, both YAML: spark-vllm-docker's recipes (`recipes/*.yaml`: name, container, model,
defaults, env, command with `{placeholder}`s) and sparkrun's (the same keys plus runtime, min_nodes, ...).
The engine command's flags that sparkc manages become spec fields; the rest become engine.args. What a
recipe cannot say (the nodes' addresses, where the weights sit) is written as a marked placeholder.
"""

from __future__ import annotations

import io
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from compiler.diagnostics import Path, printable, show_key
from compiler.engines import engines
from compiler.engines.flag_table import is_flag, newest, read_words
from compiler.engines.sglang import MANAGED as SGLANG_MANAGED
from compiler.engines.speculative import SGLANG_NAMES, VLLM_MTP_NAMES
from compiler.engines.vllm import MANAGED as VLLM_MANAGED
from compiler.names import SECRET_NAME
from compiler.spec.load import kind_of, load_text, locate, to_plain
from compiler.spec.patches import MAX_BYTES, MAX_FILES
from compiler.spec.typed import DraftMethod, EngineKind
from compiler.tools.recipe_mods import Mod, patch_files, read_mod
from compiler.user_files import BadJson, ascii_int, loads_json

PLACEHOLDER = "PLACEHOLDER"
# Keys read into the spec; any other top-level key of the recipe is reported.
_READ = {"name", "container", "model", "runtime", "defaults", "env", "command", "min_nodes", "description", "volumes"}
# Keys that describe the recipe, not the deployment: dropped without a word.
_QUIET = {"recipe_version", "sparkrun_version", "description", "metadata", "maintainer"}
# Keys about how many nodes the recipe's launcher may use: a spec names its nodes, so nothing is lost.
_NODE_COUNT = {"solo_only", "cluster_only", "max_nodes", "solo"}
# Keys read by their own step below (what the image needs before it runs).
_IMAGE_STEPS = {"build_args", "mods"}
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
# Nodes a recipe can ask for (one per GPU, at least min_nodes): spark-a to spark-z.
MAX_NODES = 26
_WHAT = {int: "a whole number", float: "a number", str: "text"}
_PROGRAMS = (
    ("vllm", "serve"),
    ("python3", "-m", "vllm.entrypoints.openai.api_server"),
    ("python3", "-m", "sglang.launch_server"),
    ("sglang", "serve"),
)
# The runtime names of sparkrun and spark-vllm-docker -> the engine, and how its launcher forms a group of
# nodes (None: as the command or sparkc's default says). sparkrun's vllm-distributed runs vLLM's own
# --nnodes mode; vllm-ray and eugr-vllm-ray start Ray first.
_RUNTIMES: dict[str, tuple[str, str | None]] = {
    "vllm": ("vllm", None),
    "eugr-vllm": ("vllm", None),
    "vllm-ray": ("vllm", "ray"),
    "eugr-vllm-ray": ("vllm", "ray"),
    "vllm-distributed": ("vllm", "native"),
    "sglang": ("sglang", None),
}
# Values recipes give a limit to mean "the engine decides": the field is left out, so the engine's default applies.
_ENGINE_DECIDES = {"auto", "none", "null", "default", ""}


class RecipeError(Exception):
    """The recipe cannot be read as a recipe at all."""


@dataclass(frozen=True)
class RecipeWarning:
    """What did not carry over, about one recipe key (`defaults.port`), at its line and column."""

    key: str
    message: str
    line: int = 0
    column: int = 0
    error: bool = False  # the spec would not do what the recipe does: nothing is written

    def __str__(self) -> str:
        return printable(f"{self.key}: {self.message}")


@dataclass(frozen=True)
class Imported:
    spec_text: str
    warnings: tuple[RecipeWarning, ...]  # errors among them (`error`): the spec must not be used as it is
    # Files to write beside the spec (path relative to its folder -> bytes): the mods' patch folder.
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[RecipeWarning, ...]:
        return tuple(w for w in self.warnings if w.error)


class _Notes(list[tuple[Path, str, bool, bool]]):
    """The warnings and errors as they are found: the recipe path each is about, the message, whether it is
    about the key (placed at the key) or its value (placed at the value), and whether it is an error."""

    def add(self, path: Path, message: str, at_key: bool = False) -> None:
        self.append((path, message, at_key, False))

    def error(self, path: Path, message: str, at_key: bool = False) -> None:
        self.append((path, message, at_key, True))


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
    warnings = _Notes()
    fields: dict[str, Any] = {}
    runtime = str(recipe.get("runtime") or "vllm")
    if runtime not in _RUNTIMES:
        known = ", ".join(sorted(_RUNTIMES))
        raise RecipeError(f"{printable(filename)}: runtime {printable(repr(runtime))}: sparkc runs {known}")
    kind, backend = _RUNTIMES[runtime]
    defaults = _defaults(recipe.get("defaults"), fields, warnings)
    command = recipe.get("command") or _default_command(kind, defaults)
    # sparkrun fills `{model}` with the recipe's model (the Hub id); a `defaults.model` wins.
    # One word, whatever it holds (a Hub id has no spaces; a hostile one must not become several flags).
    model = recipe.get("model")
    values = {"model": shlex.quote(model), **defaults} if isinstance(model, str) else defaults
    # spark-vllm-docker's launcher formats the command, so its recipes write a JSON brace as {{ }}; sparkrun's
    # recipes (they name a runtime) are filled without that, and '{"a": {"b": 1}}' ends in a real }}.
    args = _command(command, values, kind, fields, warnings, unescape="runtime" not in recipe)
    if backend is not None:
        fields["engine.backend"] = backend  # how the recipe's own launcher runs it, whatever the command says
    _image_steps(recipe, args, warnings)
    files = _mods(recipe, args, fields, warnings, recipes_dir, patches)
    for key in sorted(set(recipe) - _READ - _QUIET - _NODE_COUNT - _IMAGE_STEPS, key=str):
        warnings.add((key,), "not mapped; sparkc has no equivalent (review it by hand)", at_key=True)
    switches = set() if recipe.get("command") else set(_DEFAULT_SWITCHES[kind])
    for key in sorted(set(defaults) - set(_DEFAULTS) - {"model_path"} - switches, key=str):
        if not re.search(r"\{" + re.escape(str(key)) + r"\}", command):
            warnings.add(("defaults", key), "not mapped; the command does not use it", at_key=True)
    spec = _spec(recipe, kind, fields, args, warnings)
    out = io.StringIO()
    yaml = YAML()
    yaml.width = 200
    yaml.dump(spec, out)
    located = tuple(_located(document.data, *warning) for warning in warnings)
    header = f"Imported from {filename} by `sparkc import`; {PLACEHOLDER} marks what the recipe does not say."
    notes = "".join(f"# {'error' if w.error else 'warning'}: {w}\n" for w in located)
    return Imported(f"# {printable(header)}\n" + notes + out.getvalue(), located, files)


# sparkrun builds the command of a recipe without one from these defaults (recipe key -> the engine's flag);
# a switch is written when its value is true.
_DEFAULT_FLAGS = {
    "vllm": {
        "port": "--port",
        "host": "--host",
        "tensor_parallel": "--tensor-parallel-size",
        "pipeline_parallel": "--pipeline-parallel-size",
        "gpu_memory_utilization": "--gpu-memory-utilization",
        "max_model_len": "--max-model-len",
        "max_num_batched_tokens": "--max-num-batched-tokens",
        "max_num_seqs": "--max-num-seqs",
        "served_model_name": "--served-model-name",
        "dtype": "--dtype",
        "quantization": "--quantization",
        "kv_cache_dtype": "--kv-cache-dtype",
        "distributed_executor_backend": "--distributed-executor-backend",
    },
    "sglang": {
        "port": "--port",
        "host": "--host",
        "tensor_parallel": "--tp-size",
        "pipeline_parallel": "--pp-size",
        "gpu_memory_utilization": "--mem-fraction-static",
        "max_model_len": "--context-length",
        "max_num_seqs": "--max-running-requests",
        "served_model_name": "--served-model-name",
        "dtype": "--dtype",
        "quantization": "--quantization",
        "chunked_prefill": "--chunked-prefill-size",
        "kv_cache_dtype": "--kv-cache-dtype",
        "tokenizer_path": "--tokenizer-path",
    },
}
_DEFAULT_SWITCHES = {
    "vllm": {
        "enforce_eager": "--enforce-eager",
        "enable_prefix_caching": "--enable-prefix-caching",
        "trust_remote_code": "--trust-remote-code",
        "enable_auto_tool_choice": "--enable-auto-tool-choice",
    },
    "sglang": {
        "trust_remote_code": "--trust-remote-code",
        "enable_torch_compile": "--enable-torch-compile",
        "disable_radix_cache": "--disable-radix-cache",
    },
}


def _default_command(kind: str, defaults: dict[Any, Any]) -> str:
    """The command sparkrun's launcher builds for a recipe without one, with `{key}` for each value."""
    program = "vllm serve" if kind == "vllm" else "python3 -m sglang.launch_server"  # the model: the spec's
    words = [program]
    for key, flag in _DEFAULT_FLAGS[kind].items():
        if key in defaults and defaults[key] is not None:
            words.append(f"{flag} {{{key}}}")
    for key, flag in _DEFAULT_SWITCHES[kind].items():
        if defaults.get(key) is True:
            words.append(flag)
    return " ".join(words)


# A command word that names a file by a relative path (`unsloth.jinja`, `tool_parser.py`): a file in the
# container's working folder, which an eugr mod puts there.
_RELATIVE_FILE = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.(?:jinja|j2|json|py|yaml|yml|txt|tiktoken|model)")


def _image_steps(recipe: dict[str, Any], args: list[str], warnings: _Notes) -> None:
    """build_args and mods: what spark-vllm-docker does to the image before the engine starts."""
    image = str(recipe.get("container"))
    build = recipe.get("build_args")
    if build:
        words = [str(w) for w in build] if isinstance(build, list) else shlex.split(str(build))
        command = shlex.join(
            ["./build-and-copy.sh", "-t", image, *words, "--copy-to", "NODE2,NODE3", "--copy-parallel"]
        )
        warnings.error(
            ("build_args",),
            f"the image {image} is built from spark-vllm-docker's Dockerfiles, not pulled: build it on the head node "
            f"and copy it to the other nodes first, in a checkout of eugr/spark-vllm-docker: `{command}` (NODE2,NODE3: "
            "the other nodes); then remove build_args from the recipe and import it again",
            at_key=True,
        )


def _mods(
    recipe: dict[str, Any],
    args: list[str],
    fields: dict[str, Any],
    warnings: _Notes,
    recipes_dir: FilePath | None,
    patches: str | None,
) -> dict[str, bytes]:
    """spark-vllm-docker's mods as container.hooks (their files into the patch folder `patches`) where the
    recipe's repository is at hand; else an error where the command needs what a mod makes, a warning otherwise."""
    raw = recipe.get("mods")
    listed = raw if isinstance(raw, list) else [raw] if raw else []
    if not listed:
        return {}
    if recipes_dir is None:
        _mods_lost(listed, args, warnings)
        return {}
    found = _read_mods(listed, recipes_dir, warnings)
    if found is None:
        return {}
    if patches is None:
        warnings.error(("mods",), "the mods' files are written beside the spec: give the spec's file with -o SPEC")
        return {}
    files = patch_files(found)
    if isinstance(files, str):
        warnings.error(("mods",), files)
        return {}
    fields["container.hooks"] = {"pre_engine": [mod.command for mod in found], "patches": patches}
    return {f"{patches}/{path}": data for path, data in files.items()}


def _read_mods(listed: list[Any], recipes_dir: FilePath, warnings: _Notes) -> list[Mod] | None:
    """Each listed mod, each folder read once and all of them together at most one patch folder's size
    (a mod named a thousand times is read once, and reading stops where they no longer fit); None: an error."""
    if len(listed) > MAX_FILES:
        warnings.error(("mods",), f"{len(listed)} mods; a patch folder holds at most {MAX_FILES} files")
        return None
    read: dict[str, Mod | str] = {}
    found: list[Mod] = []
    total = 0
    for i, mod in enumerate(listed):
        if not isinstance(mod, str):
            warnings.error(("mods", i), f"{kind_of(mod)}, not a mod's folder")
            continue
        key = mod.rstrip("/")
        if key not in read:
            read[key] = read_mod(recipes_dir, mod)
            total += _size(read[key])
        this = read[key]
        if isinstance(this, str):
            warnings.error(("mods", i), this)
        elif total > MAX_BYTES:
            warnings.error(("mods", i), f"the mods hold over {MAX_BYTES // 2**20} MiB: build them into the image")
            return None
        else:
            found.append(this)
    return found if len(found) == len(listed) else None


def _size(mod: Mod | str) -> int:
    return sum(len(data) for data in mod.files.values()) if isinstance(mod, Mod) else 0


def _mods_lost(listed: list[Any], args: list[str], warnings: _Notes) -> None:
    needed = [w for w in args if _RELATIVE_FILE.fullmatch(w)]
    carry = "give the recipe's repository (a checkout of it) with --recipes-dir to carry the mods as container.hooks"
    for i, mod in enumerate(listed):
        if needed:
            warnings.error(
                ("mods", i),
                f"the command names {', '.join(needed)}, which the mod {mod} puts into the container: {carry}",
            )
        else:
            warnings.add(("mods", i), f"the mod {mod} is not applied, so what it patches is lost: {carry}")


def _defaults(raw: Any, fields: dict[str, Any], warnings: _Notes) -> dict[Any, Any]:
    """The recipe's defaults; those that are spec fields, typed, into `fields`."""
    if not isinstance(raw, dict):
        if raw is not None:
            warnings.add(("defaults",), f"{kind_of(raw)}, not a mapping of values; ignored")
        return {}
    for key, value in raw.items():
        if key in _DEFAULTS and isinstance(value, str) and value.strip().lower() in _ENGINE_DECIDES:
            warnings.add(("defaults", key), f"{value!r}: left to the engine (its default applies)")
        elif key in _DEFAULTS:
            target, type_of = _DEFAULTS[key]
            typed = _typed(value, type_of)
            if typed is None:
                warnings.add(
                    ("defaults", key), f"{_shown(value)} is not {_WHAT[type_of]}; left out: set {target} by hand"
                )
            else:
                fields[target] = typed
    return raw


def _located(data: Any, path: Path, message: str, at_key: bool, error: bool) -> RecipeWarning:
    line, column = locate(data, path, at_key)
    return RecipeWarning(".".join(show_key(str(part)) for part in path), message, line, column, error)


def _shown(value: Any) -> str:
    """A recipe's value in a warning: itself where it is short text or a number, else what kind it is."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(repr(value)) > 60:
        return kind_of(value)
    return repr(value)


def _typed(value: Any, type_of: type) -> Any:
    """`value` as a spec field of type `type_of` takes it (a whole number may be written as text), or None."""
    if type_of is str:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return value if isinstance(value, str) else str(value) if number else None
    if isinstance(value, str) and ascii_int(value.strip()) is not None:
        value = ascii_int(value.strip())
    if type_of is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _command(
    command: str, defaults: dict[str, Any], kind: str, fields: dict[str, Any], warnings: _Notes, *, unescape: bool
) -> list[str]:
    """The engine command's flags: managed ones into `fields`, the rest returned as engine.args. `unescape`:
    the command's {{ and }} stand for { and } (a Python format string, as spark-vllm-docker fills it)."""
    unfilled: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        if match.group(1) in defaults:
            return str(defaults[match.group(1)])
        unfilled.add(match.group(0))
        return match.group(0)

    text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", fill, command.replace("\\\n", " "))
    if unescape:
        text = text.replace("{{", "{").replace("}}", "}")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        warnings.add(("command",), f"cannot be split into words ({exc}); no engine flags imported")
        return []
    # `/usr/local/bin/vllm serve` and `python3.12 -m ...` run the same programs.
    named = [re.sub(r"^python(3(\.\d+)?)?$", "python3", w.rsplit("/", 1)[-1]) for w in words[:1]] + words[1:3]
    for program in _PROGRAMS:
        if tuple(named[: len(program)]) == program:
            words = words[len(program) :]
            break
    else:
        if words and not words[0].startswith("-"):
            warnings.error(
                ("command",),
                f"runs {shlex.join(words[:3])}, not an engine sparkc starts (vllm serve, python3 -m "
                "vllm.entrypoints.openai.api_server, sglang serve, python3 -m sglang.launch_server): sparkc would "
                "run its engine in its place; write the recipe's command with one of them, or keep this launcher",
            )
            return []
        if words:
            warnings.add(("command",), f"does not start with vllm serve or sglang.launch_server; read as {kind} flags")
    if words and not words[0].startswith("-"):
        # vllm serve's positional model: sparkc passes the mounted path; the id names the model where the
        # recipe has no `model:`.
        fields["recipe.model"], words = words[0], words[1:]
    return _flags(words, EngineKind(kind), unfilled, fields, warnings)


def _flags(
    words: list[str], kind: EngineKind, unfilled: set[str], fields: dict[str, Any], warnings: _Notes
) -> list[str]:
    """The words as the engine's newest parser reads them (its flag table says which words are a flag's
    values): managed flags into `fields`, the rest kept whole as engine.args."""
    engine = engines()[kind]
    managed = VLLM_MANAGED if kind is EngineKind.VLLM else SGLANG_MANAGED
    table = newest(kind)
    read, _ = read_words(table, tuple(words), engine.canonical)
    args: list[str] = []
    speculative: dict[str, tuple[str, list[str]]] = {}  # option -> its value and its words as written
    for word in read:
        values = [words[j] for j in word.values]
        flag, eq, inline = word.text.partition("=")
        given = [inline] if eq else values
        if word.option is not None and word.option.name in _SPECULATIVE[kind] and len(given) == 1:
            speculative[word.option.name] = (given[0], [word.text, *values])
            continue
        if _left_out(word.text, values, given, unfilled, word.option is None, warnings):
            continue
        target = managed.get(word.option.name) if word.option is not None else None
        if kind is EngineKind.VLLM and word.option is not None and _replicas(word.option.name, flag, given, fields):
            continue
        if target is None:
            args += [word.text, *values]
        elif len(given) > 1:
            fields_set = _set_field(target, flag, given[0], fields)
            lost = " ".join(given[1:])
            what = f"{target} holds one value: {given[0]} is kept" if fields_set else "dropped"
            warnings.add(("command",), f"{flag} {' '.join(given)}: {what}, {lost} is not served")
        elif not _set_field(target, flag, given[0] if given else "", fields):
            warnings.add(("command",), f"{flag} is set by sparkc from {target}; dropped")
    if speculative:
        config = _vllm_config(speculative) if kind is EngineKind.VLLM else _sglang_config(speculative)
        if config is None or not _draft(config, fields, warnings):
            args += [w for _, written in speculative.values() for w in written]  # the engine's to judge, as written
    return args


def _left_out(
    text: str, values: list[str], given: list[str], unfilled: set[str], stray: bool, warnings: _Notes
) -> bool:
    """A flag whose value is a placeholder the recipe's defaults do not fill, or a word that follows no flag
    (`stray`, unless it is a flag the table does not know): left out, with a warning (True)."""
    flag = text.partition("=")[0]
    if any(v in unfilled for v in given):
        shown = " ".join([text, *values])
        warnings.add(
            ("command",),
            f"{shown}: the recipe's defaults give {', '.join(v for v in given if v in unfilled)} no value; "
            f"left out (the engine's default applies): add {flag} with a value to engine.args",
        )
        return True
    if stray and not is_flag(text):
        warnings.add(("command",), f"{text!r} follows no flag that takes it; left out")
        return True
    return False


def _replicas(option: str, flag: str, given: list[str], fields: dict[str, Any]) -> bool:
    """vLLM's data- and expert-parallel flags as engine.data_parallel and engine.expert_parallel (True: taken).
    Its per-node ones (size-local, start rank, address, --headless) sparkc derives, so they are dropped."""
    if option == "--data-parallel-size" and len(given) == 1 and ascii_int(given[0]) is not None:
        fields["engine.data_parallel"] = ascii_int(given[0])
        return True
    if option == "--enable-expert-parallel" and not given:
        fields["engine.expert_parallel"] = not flag.startswith("--no-")
        return True
    return False


# The flags of speculative decoding, read together into model.draft where the spec can say what they say.
_SPECULATIVE = {
    EngineKind.VLLM: ("--speculative-config", "--spec-method", "--spec-model", "--spec-tokens"),
    EngineKind.SGLANG: (
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
    ),
}
_DRAFT_KEYS = {"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}


def _vllm_config(words: dict[str, tuple[str, list[str]]]) -> dict[str, Any] | None:
    """vLLM's speculative config as its engine merges it (EngineArgs.create_speculative_config), None where
    it is no JSON object or a shorthand flag repeats one of its keys (vLLM refuses that)."""
    config: Any = {}
    if "--speculative-config" in words:
        try:
            config = loads_json(words["--speculative-config"][0], "--speculative-config")
        except BadJson:
            return None
    if not isinstance(config, dict):
        return None
    for flag, key in (
        ("--spec-method", "method"),
        ("--spec-model", "model"),
        ("--spec-tokens", "num_speculative_tokens"),
    ):
        if flag in words:
            if key in config:
                return None
            value = words[flag][0]
            number = ascii_int(value) if key == "num_speculative_tokens" else None
            config[key] = value if number is None else number
    if config.get("method") is None:  # vLLM's own inference of the method
        config["method"] = "ngram" if config.get("model") in ("ngram", "[ngram]") else "draft_model"
    if config["method"] == "ngram" and config.get("model") in ("ngram", "[ngram]"):
        del config["model"]
    if config["method"] in VLLM_MTP_NAMES:  # vLLM reads each model's MTP name as mtp
        config["method"] = "mtp"
    return config


def _sglang_config(words: dict[str, tuple[str, list[str]]]) -> dict[str, Any] | None:
    """SGLang's speculative flags as the spec says them: a chain of N steps of one candidate (N + 1 draft
    tokens), or NGRAM's draft tokens; None for what the spec cannot hold (a tree, another algorithm)."""
    value = {flag: given for flag, (given, _) in words.items()}
    algorithm = value.get("--speculative-algorithm", "").upper()
    method = {v: k for k, v in SGLANG_NAMES.items()}.get(algorithm)
    numbers = {f: value[f] for f in value if f != "--speculative-algorithm" and f != "--speculative-draft-model-path"}
    counts = {f: ascii_int(v) for f, v in numbers.items()}
    if method is None or None in counts.values():
        return None
    steps, topk, tokens = (
        counts.get(f) for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    )
    config: dict[str, Any] = {"method": method}
    if "--speculative-draft-model-path" in value:
        config["model"] = value["--speculative-draft-model-path"]
    if method == "ngram":
        if steps is not None or topk is not None:
            return None
        if tokens is not None:
            config["num_speculative_tokens"] = tokens - 1
    elif steps is not None:
        if topk not in (None, 1) or tokens not in (None, steps + 1):
            return None
        config["num_speculative_tokens"] = steps
    elif topk is not None or tokens is not None:
        return None
    return config


def _draft(config: dict[str, Any], fields: dict[str, Any], warnings: _Notes) -> bool:
    """A speculative config as model.draft, where the spec can say it (True: it is in `fields`). A draft
    named by its Hugging Face id is downloaded by nothing on the nodes (HF_HUB_OFFLINE=1): its path is a
    PLACEHOLDER to fill, or, where the spec cannot carry the config, an error."""
    model, tokens = config.get("model"), config.get("num_speculative_tokens")
    numbers = [config[k] for k in ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max") if k in config]
    fits = (
        set(config) <= _DRAFT_KEYS
        and config["method"] in {m.value for m in DraftMethod}
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in numbers)
        and (model is None or isinstance(model, str))
    )
    if not fits:
        if isinstance(model, str) and not model.startswith("/"):
            warnings.error(
                ("command",),
                f"--speculative-config names the draft {model} by its Hugging Face id: nothing downloads it on the "
                "nodes (sparkc sets HF_HUB_OFFLINE=1) and nothing mounts it; download it to the same folder on every "
                "node, mount it with container.mounts and write its path in the container as the draft's model",
            )
        return False
    draft: dict[str, Any] = {"method": config["method"]}
    if isinstance(model, str):
        draft["path"] = model if model.startswith("/") else f"/{PLACEHOLDER}/models/{model.rsplit('/', 1)[-1]}"
    if tokens is not None:
        draft["num_speculative_tokens"] = tokens
    draft.update((k, config[k]) for k in ("prompt_lookup_min", "prompt_lookup_max") if k in config)
    fields["model.draft"] = draft
    if isinstance(model, str) and not model.startswith("/"):
        warnings.add(
            ("command",),
            f"the draft {model} is named by its Hugging Face id: nothing downloads it on the nodes; put it in the "
            f"same folder on every node and write that folder as model.draft.path (now {draft['path']})",
        )
    return True


def _set_field(target: str, flag: str, value: str, fields: dict[str, Any]) -> bool:
    numeric = ("engine.port", "engine.tensor_parallel", "engine.pipeline_parallel", "engine.max_model_len")
    if target in (*numeric, "engine.gpu_memory_utilization") and value.strip().lower() in _ENGINE_DECIDES:
        fields.pop(target, None)  # `--max-model-len auto`: the engine decides, as without the flag
    elif target == "engine.trust_remote_code":
        fields[target] = True
    elif target == "engine.backend":
        fields[target] = value
    elif target == "model.mount":
        # A path is where the container sees the weights; a Hub id names the model (where `model:` does not).
        fields[target if value.startswith("/") else "recipe.model"] = value
    elif target in numeric:
        number = ascii_int(value)
        fields[target] = value if number is None else number
    elif target == "engine.gpu_memory_utilization":
        fields[target] = float(value) if re.fullmatch(r"[0-9]*\.?[0-9]+", value) else value
    elif target in ("engine.host", "engine.reasoning_parser", "model.name"):
        fields[target] = value
    else:
        return False
    return True


def _spec(recipe: dict[str, Any], kind: str, fields: dict[str, Any], args: list[str], warnings: _Notes) -> Any:
    model = recipe.get("model") or fields.pop("recipe.model", "")
    if not isinstance(model, str):
        warnings.add(("model",), f"{kind_of(model)}, not a Hugging Face id; left out: set model.name by hand")
        model = ""
    folder = model.rsplit("/", 1)[-1] or "model"
    in_defaults = isinstance(recipe.get("defaults"), dict) and "tensor_parallel" in recipe["defaults"]
    count = _count(recipe.get("min_nodes"), fields, in_defaults, warnings)
    spec = CommentedMap(sparkc=1, name=_name(str(recipe.get("name") or folder)))
    hcas = _recipe_hcas(recipe.get("env")) if count > 1 else None
    spec["cluster"] = CommentedMap(nodes=[_node(i, count > 1, hcas) for i in range(count)])
    spec["container"] = _container(recipe, fields, warnings)
    env = spec["container"].get("env")
    if hcas and env is not None:  # now each node's fabric.hcas, from which sparkc writes NCCL_IB_HCA
        env.pop("NCCL_IB_HCA", None)
        if not env:
            del spec["container"]["env"]
    spec["model"] = CommentedMap(path=f"/{PLACEHOLDER}/models/{folder}")
    spec["model"].yaml_add_eol_comment(
        printable(f"{PLACEHOLDER}: where {model or 'the weights'} sit on every node"), "path"
    )
    for key in ("mount", "name", "draft"):
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


def _container(recipe: dict[str, Any], fields: dict[str, Any], warnings: _Notes) -> CommentedMap:
    container = CommentedMap(image=recipe["container"])
    env, secrets = _env(recipe.get("env"), warnings)
    if env:
        container["env"] = env
    if secrets:
        container["secrets"] = secrets
    mounts = _volumes(recipe.get("volumes"), warnings)
    if mounts:
        container["mounts"] = mounts
    if "container.hooks" in fields:
        container["hooks"] = fields["container.hooks"]
    return container


def _volumes(raw: Any, warnings: _Notes) -> list[CommentedMap]:
    """A recipe's `volumes` (docker's -v words, HOST:CONTAINER[:ro|rw], or a mapping of host to container
    folder) as container.mounts; docker mounts read-write unless told `ro`, and so does the spec here."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        items: list[tuple[Path, Any]] = [(("volumes", key), f"{key}:{value}") for key, value in raw.items()]
    elif isinstance(raw, list):
        items = [(("volumes", i), value) for i, value in enumerate(raw)]
    else:
        warnings.error(("volumes",), f"{kind_of(raw)}; write a list of HOST:CONTAINER[:ro] folders")
        return []
    mounts = []
    for where, value in items:
        parts = value.split(":") if isinstance(value, str) else []
        mode = parts.pop() if len(parts) == 3 else "rw"
        if len(parts) != 2 or mode not in {"ro", "rw"}:
            warnings.error(where, f"{_shown(value)} is not HOST:CONTAINER[:ro|rw]; write it so")
        elif not all(part.startswith("/") for part in parts):
            warnings.error(
                where,
                f"{_shown(value)}: sparkc mounts a node's folder by its absolute path, not a named docker volume or "
                "a path relative to the launcher; write the folder's absolute path on every node",
            )
        else:
            mounts.append(CommentedMap(host=parts[0], container=parts[1], readonly=mode == "ro"))
    return mounts


def _count(min_nodes: Any, fields: dict[str, Any], from_defaults: bool, warnings: _Notes) -> int:
    """Nodes to write: one per GPU the parallelism uses (a DGX Spark has one). A larger min_nodes is named:
    the engine would use only that many GPUs, and sparkc refuses nodes the layout leaves idle."""
    parallel = [fields.get(f"engine.{key}", 1) for key in ("tensor_parallel", "pipeline_parallel", "data_parallel")]
    gpus = math.prod(n if isinstance(n, int) and not isinstance(n, bool) else 1 for n in parallel)
    least = _typed(min_nodes, int) if min_nodes is not None else 1
    if least is None:
        warnings.add(("min_nodes",), f"{_shown(min_nodes)} is not a whole number; read as 1")
        least = 1
    count = max(gpus, 1)
    if least > count:
        warnings.add(
            ("min_nodes",),
            f"{least} nodes, but the command uses {count} GPU(s) (tensor x pipeline x data parallel): "
            f"{min(count, MAX_NODES)} node(s) written; to use more, raise engine.tensor_parallel and add the nodes",
        )
    if count > MAX_NODES:
        about = ("defaults", "tensor_parallel") if from_defaults else ("command",)
        warnings.add(
            about, f"needs more than {MAX_NODES} nodes; the first {MAX_NODES} are written: add the rest by hand"
        )
    return min(count, MAX_NODES)


def _node(index: int, several: bool, hcas: list[str] | None) -> CommentedMap:
    """A node the recipe does not describe: every address is a marked placeholder to replace. Of several
    nodes, each lists its RDMA devices: the recipe's NCCL_IB_HCA, else a placeholder (sockets are a choice)."""
    name = f"spark-{chr(ord('a') + index)}"
    node = CommentedMap(name=name)
    if index:
        node["ssh"] = f"{PLACEHOLDER}-{name}"
    node["fabric"] = CommentedMap(ip=f"192.168.100.{10 + index}", netdev="enp1s0f1np1")
    node.yaml_add_eol_comment(f"{PLACEHOLDER}: this node's CX-7 address and netdev", "fabric")
    if several:
        node["fabric"]["hcas"] = list(hcas or [PLACEHOLDER])
        why = "the recipe's NCCL_IB_HCA" if hcas else f"{PLACEHOLDER}: its CX-7 port's RDMA devices (ibdev2netdev)"
        node["fabric"].yaml_add_eol_comment(f"{why}; or transport: sockets for NCCL over TCP", "hcas")
    return node


def _recipe_hcas(env: Any) -> list[str] | None:
    """The RDMA devices a recipe's NCCL_IB_HCA names (=a,b:1 as hcas: [=a, b:1]); None where it names none
    that a spec can list (absent, or `^` excluding devices rather than naming them)."""
    value = env.get("NCCL_IB_HCA") if isinstance(env, dict) else None
    if not isinstance(value, str):
        return None
    exact = value.startswith("=")
    names = [n.strip() for n in value.removeprefix("=").split(",")]
    if not names or not all(re.fullmatch(r"[A-Za-z0-9_]+(:[0-9]+)?", n) for n in names):
        return None
    return [f"={names[0]}", *names[1:]] if exact else names


def _env(raw: Any, warnings: _Notes) -> tuple[CommentedMap, list[str]]:
    env, secrets = CommentedMap(), []
    for name, value in (raw or {}).items() if isinstance(raw, dict) else []:
        if SECRET_NAME.search(str(name).upper()):
            secrets.append(str(name))
            warnings.add(
                ("env", name), "looks like a secret: listed under container.secrets (export it at launch)", at_key=True
            )
        else:
            env[str(name)] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return env, secrets


def _name(text: str) -> str:
    """A deployment name sparkc accepts: lower-case letters, digits and '-', starting with a letter, <= 40."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    name = name if name[:1].isalpha() else f"m-{name}"
    return name[:40].rstrip("-") or "imported"
