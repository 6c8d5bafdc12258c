"""A recipe's engine command: its words as the engine's parser reads them. The flags sparkc manages become
spec fields, the speculative ones model.draft, and the rest engine.args, kept whole."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import Any

from compiler.engines import Engine, RecipeWords
from compiler.engines.flag_table import Word, is_flag, newest, read_words
from compiler.tools.importer.output import RECIPE_KEY, Notes
from compiler.tools.importer.speculative import read_draft
from compiler.user_files import ascii_int

# The commands of the engines sparkc starts, as recipes write them.
_PROGRAMS = (
    ("vllm", "serve"),
    ("python3", "-m", "vllm.entrypoints.openai.api_server"),
    ("python3", "-m", "sglang.launch_server"),
    ("sglang", "serve"),
)
# A Python format string's fields and escapes, as spark-vllm-docker's launcher fills its recipes' commands.
_FORMAT = re.compile(r"\{\{|\}\}|" + RECIPE_KEY.pattern)
# Values recipes give a limit to mean "the engine decides": the field is left out, so the engine's default applies.
ENGINE_DECIDES = {"auto", "none", "null", "default", ""}


def recipe_words(engine: Engine) -> RecipeWords:
    """How recipes write the engine's command; RUNTIMES names only engines that have it."""
    assert engine.recipe_words is not None, f"no recipe runtime runs {engine.name}"
    return engine.recipe_words


def default_command(engine: Engine, defaults: dict[Any, Any]) -> str:
    """The command sparkrun's launcher builds for a recipe without one, with `{key}` for each value."""
    words = recipe_words(engine)
    command = [words.program]  # the model: the spec's
    for key, flag in words.default_flags.items():
        if key in defaults and defaults[key] is not None:
            command.append(f"{flag} {{{key}}}")
    for key, flag in words.default_switches.items():
        if defaults.get(key) is True:
            command.append(flag)
    return " ".join(command)


def read_command(
    command: str, defaults: dict[str, Any], engine: Engine, fields: dict[str, Any], warnings: Notes, *, unescape: bool
) -> list[str]:
    """The engine command's flags: managed ones into `fields`, the rest returned as engine.args. `unescape`:
    the command's {{ and }} stand for { and } (a Python format string, as spark-vllm-docker fills it)."""
    unfilled: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        if match.group(1) is None:  # {{ or }}: one brace, in the template only, never inside a filled value
            return match.group(0)[0]
        if match.group(1) in defaults:
            return str(defaults[match.group(1)])
        unfilled.add(match.group(0))
        return match.group(0)

    text = (_FORMAT if unescape else RECIPE_KEY).sub(fill, command.replace("\\\n", " "))
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
            warnings.add(
                ("command",), f"does not start with vllm serve or sglang.launch_server; read as {engine.kind} flags"
            )
    if words and not words[0].startswith("-"):
        # vllm serve's positional model: sparkc passes the mounted path; the id names the model where the
        # recipe has no `model:`.
        fields["recipe.model"], words = words[0], words[1:]
    return _flags(words, engine, unfilled, fields, warnings)


def _flags(words: list[str], engine: Engine, unfilled: set[str], fields: dict[str, Any], warnings: Notes) -> list[str]:
    """The words as the engine's newest parser reads them (its flag table says which words are a flag's
    values): managed flags into `fields`, the rest kept whole as engine.args."""
    read, _ = read_words(newest(engine.kind), tuple(words), engine.canonical)
    known = recipe_words(engine)
    args: list[str] = []
    speculative: dict[str, tuple[str, list[str]]] = {}  # option -> its value and its words as written
    for word in _unknown_flags_keep_their_words(read):
        values = [words[j] for j in word.values]
        flag, eq, inline = word.text.partition("=")
        given = [inline] if eq else values
        option = word.option.name if word.option is not None else ""
        if option in known.speculative_flags and len(given) == 1:
            speculative[option] = (given[0], [word.text, *values])
            continue
        if _left_out(word.text, values, given, unfilled, word.option is None, warnings):
            continue
        target = engine.managed_flags.get(option) if option else None
        replica = known.replica_fields.get(option)
        if replica is not None and _replicas(replica, flag, given, fields):
            continue
        if target is None:
            args += [word.text, *values]
        elif target == "model.name" and len(given) > 1:
            # vLLM serves every name after --served-model-name; the first is the one sparkc checks and benches.
            fields[target], fields["model.aliases"] = given[0], _unique(given[1:], given[0])
        elif len(given) > 1:
            fields_set = _set_field(target, flag, given[0], fields, engine)
            lost = " ".join(given[1:])
            what = f"{target} holds one value: {given[0]} is kept" if fields_set else "dropped"
            warnings.add(("command",), f"{flag} {' '.join(given)}: {what}, {lost} is not served")
        elif not _set_field(target, flag, given[0] if given else "", fields, engine):
            warnings.add(("command",), f"{flag} is set by sparkc from {target}; dropped")
    return args + read_draft(engine, speculative, fields, warnings)


def _unknown_flags_keep_their_words(read: list[Word]) -> list[Word]:
    """A flag the newest table does not know keeps every plain word after it: the image's own release may
    take several (SGLang's older --cuda-graph-bs 1 2 4), and that parser reads them as the recipe wrote them."""
    merged: list[Word] = []
    for word in read:
        last = merged[-1] if merged else None
        if last is not None and last.option is None and is_flag(last.text) and not is_flag(word.text):
            merged[-1] = replace(last, values=(*last.values, word.index))
        else:
            merged.append(word)
    return merged


def _unique(names: list[str], first: str) -> list[str]:
    """The served names after the first, each once (the spec's model.aliases holds no repeats)."""
    return [n for i, n in enumerate(names) if n != first and n not in names[:i]]


def _left_out(text: str, values: list[str], given: list[str], unfilled: set[str], stray: bool, warnings: Notes) -> bool:
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


def _replicas(target: str, flag: str, given: list[str], fields: dict[str, Any]) -> bool:
    """A data- or expert-parallel flag as engine.data_parallel or engine.expert_parallel (True: taken). The
    per-node ones (vLLM's size-local, start rank, address, --headless) sparkc derives, so they are dropped."""
    if target == "engine.data_parallel" and len(given) == 1 and ascii_int(given[0]) is not None:
        fields[target] = ascii_int(given[0])
        return True
    if target == "engine.expert_parallel" and not given:
        fields[target] = not flag.startswith("--no-")
        return True
    return False


def _set_field(target: str, flag: str, value: str, fields: dict[str, Any], engine: Engine) -> bool:
    numeric = ("engine.port", "engine.tensor_parallel", "engine.pipeline_parallel", "engine.max_model_len")
    if target == "engine.max_model_len" and value.strip() == engine.context_fits_memory:
        fields[target] = value.strip()  # `--max-model-len auto`: fit to the KV cache, not the engine's default
    elif target in (*numeric, "engine.gpu_memory_utilization") and value.strip().lower() in ENGINE_DECIDES:
        fields.pop(target, None)  # `--max-model-len auto`: the engine decides, as without the flag
    elif target == "engine.trust_remote_code":
        fields[target] = True
    elif target == "engine.backend":
        # vLLM's multiprocessing executor is its own multi-node mode: sparkc's native backend.
        fields[target] = "native" if value in ("mp", "uni") else value
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
