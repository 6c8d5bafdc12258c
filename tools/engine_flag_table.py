"""Writes the flag table of one engine release from the engine's own argument parser.

Run it with the Python of an environment where the engine imports (it needs only the standard library
besides the engine), from the top of the checkout:

    VLLM_TARGET_DEVICE=cpu /opt/sparkc-sim/vllm-venv/bin/python tools/engine_flag_table.py vllm
    /tmp/venv-sglang/bin/python tools/engine_flag_table.py sglang

It writes flag_tables/<engine>-<version>.json (shipped in the wheel as compiler/flag_tables/), which
sparkc reads to check engine.args at compile time and the importer reads to tell a flag's value from the
next word. Every option string is there, with whether it takes a value, argparse's nargs, its choices and
the other spellings of the same option. With --parse it instead feeds command lines to the real parser
(tests/integration/test_engine_parsers.py). tools/make_sglang_venv.sh makes an environment where SGLang's
parser imports without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import io
import json
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

TABLES = Path(__file__).resolve().parent.parent / "flag_tables"


def vllm_top() -> argparse.ArgumentParser:
    """The `vllm` command's parser with its `serve` subcommand, built as vLLM's CLI builds it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # releases before 0.12 keep it in vllm.utils
        from vllm.utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    commands = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(commands)
    return top


def _older_vllm_on_newer_torch() -> None:
    """An older release, run on the installed newer torch, asks torch's CPU module for a function it has
    since dropped, only to pick which kernel library to load (the wheel's kernels are not loaded here)."""
    import torch

    cpu: Any = torch._C._cpu
    if not hasattr(cpu, "_is_avx512_supported"):
        cpu._is_avx512_supported = lambda: False


def vllm_parser() -> tuple[argparse.ArgumentParser, str, str]:
    """vLLM's `vllm serve` parser."""
    _older_vllm_on_newer_torch()
    import vllm

    top = vllm_top()
    serve = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices["serve"]
    return serve, vllm.__version__, "vllm.entrypoints.cli.serve.ServeSubcommand (the `vllm serve` parser)"


def sglang_parser() -> tuple[argparse.ArgumentParser, str, str]:
    """SGLang's server parser, as sglang.srt.server_args.prepare_server_args builds it."""
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, sglang.__version__, "sglang.srt.server_args.ServerArgs.add_cli_args"


PARSERS = {"vllm": vllm_parser, "sglang": sglang_parser}


class _Anything(type):
    """Whatever a stubbed module is asked for: a class that any attribute, call or subscript returns."""

    def __getattr__(cls, name: str) -> Any:
        return _Anything(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls

    def __getitem__(cls, key: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


class _StubModule(types.ModuleType):
    __path__: ClassVar[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


def _imported_by_the_engine() -> bool:
    """The import statement being run is in the engine's own code (not the import machinery's)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
        frame = frame.f_back
    return frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] in PARSERS


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for the named packages where nothing else provides them: an older release imports a
    dependency the environment lacks (diskcache) in a module its parser's module imports, not to build
    the parser. A stub that the parser did need shows: the table would lose options or choices."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = set(names)

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] not in self.names or not _imported_by_the_engine():
            return None  # another package probing for it (transformers for torchvision) sees it absent
        for finder in sys.meta_path:
            if finder is not self and finder.find_spec(name, path, target) is not None:
                return None  # the real package is there: use it
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _takes_value(action: argparse.Action) -> str:
    """`no` (a switch), `yes` (one or more words), `optional` (zero or more words)."""
    nargs = action.nargs
    if nargs == 0:
        return "no"
    if nargs in ("?", "*"):
        return "optional"
    return "yes"


def option(action: argparse.Action) -> dict[str, Any]:
    choices = None
    if action.choices is not None:
        choices = sorted(str(c) for c in action.choices)
    return {
        "names": list(action.option_strings),
        "dest": action.dest,
        "takes_value": _takes_value(action),
        "nargs": action.nargs,  # None: exactly one word; 0: none (switches); "?", "*", "+" or a number
        "choices": choices,
        "action": type(action).__name__,
    }


def table(engine: str, made: str) -> dict[str, Any]:
    parser, version, source = PARSERS[engine]()
    options = [option(a) for a in parser._actions if a.option_strings and a.dest != "help"]
    positionals = [{"dest": a.dest, "nargs": a.nargs} for a in parser._actions if not a.option_strings]
    return {
        "engine": engine,
        "version": str(version).split("+", 1)[0],
        "parser": source,
        "abbreviations": bool(parser.allow_abbrev),
        "generated_by": "tools/engine_flag_table.py",
        "made": made,
        "positionals": positionals,
        "options": sorted(options, key=lambda o: o["names"][0]),
    }


def dump(data: dict[str, Any]) -> str:
    """JSON with one option per line, so that a new release's table reads as a short diff."""
    head = {k: v for k, v in data.items() if k != "options"}
    lines = [json.dumps(o, sort_keys=True) for o in data["options"]]
    body = json.dumps(head, indent=1, sort_keys=True)[:-2]
    return body + ',\n "options": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def parse_commands(engine: str, commands: list[list[str]]) -> list[str]:
    """Each command's words after the program (`serve MODEL ...` for vLLM, the flags for SGLang), parsed by
    the engine's real parser: "" where it accepts them, else what it printed on refusing them."""
    parse = vllm_top().parse_args if engine == "vllm" else PARSERS[engine]()[0].parse_args
    results = []
    for words in commands:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parse(words)
            results.append("")
        except SystemExit:
            results.append((err.getvalue().strip().splitlines() or ["refused"])[-1])  # argparse's error line
        except ValueError as exc:  # vLLM refuses some command lines with a ValueError before argparse
            results.append(str(exc))
    return results


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("engine", choices=sorted(PARSERS))
    args.add_argument("--out", type=Path, default=TABLES, help="folder to write into (default: flag_tables/)")
    args.add_argument(
        "--stub",
        default="",
        help="comma-separated packages to stand in for where the environment lacks them (an older release's "
        "dependencies its parser does not use)",
    )
    args.add_argument(
        "--made",
        default="",
        help="how the parser was reached, recorded in the table (default: the installed package)",
    )
    args.add_argument(
        "--parse",
        action="store_true",
        help="read a JSON list of commands (lists of words) on stdin and print the parser's verdicts as JSON; "
        "then write the table only if --out is given",
    )
    given = args.parse_args(argv)
    stubs = [name for name in given.stub.split(",") if name]
    if stubs:
        sys.meta_path.append(_Stubs(stubs))
    if given.parse:
        print(json.dumps(parse_commands(given.engine, json.load(sys.stdin))))
        if given.out == TABLES:
            return 0  # --parse writes a table only where --out names a folder
    made = given.made or f"{given.engine}'s parser imported from the installed package"
    if stubs:
        made += f"; stood in for: {', '.join(stubs)}"
    data = table(given.engine, made)
    given.out.mkdir(parents=True, exist_ok=True)
    path = given.out / f"{data['engine']}-{data['version']}.json"
    path.write_text(dump(data), encoding="utf-8")
    print(f"{path}: {len(data['options'])} options of {given.engine} {data['version']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
