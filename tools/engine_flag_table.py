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
import io
import json
import sys
from pathlib import Path
from typing import Any

TABLES = Path(__file__).resolve().parent.parent / "flag_tables"


def vllm_top() -> argparse.ArgumentParser:
    """The `vllm` command's parser with its `serve` subcommand, built as vLLM's CLI builds it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    commands = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(commands)
    return top


def vllm_parser() -> tuple[argparse.ArgumentParser, str, str]:
    """vLLM's `vllm serve` parser."""
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


def table(engine: str) -> dict[str, Any]:
    parser, version, source = PARSERS[engine]()
    options = [option(a) for a in parser._actions if a.option_strings and a.dest != "help"]
    positionals = [{"dest": a.dest, "nargs": a.nargs} for a in parser._actions if not a.option_strings]
    return {
        "engine": engine,
        "version": str(version).split("+", 1)[0],
        "parser": source,
        "abbreviations": bool(parser.allow_abbrev),
        "generated_by": "tools/engine_flag_table.py",
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
        "--parse",
        action="store_true",
        help="read a JSON list of commands (lists of words) on stdin and print the parser's verdicts as JSON; "
        "then write the table only if --out is given",
    )
    given = args.parse_args(argv)
    if given.parse:
        print(json.dumps(parse_commands(given.engine, json.load(sys.stdin))))
        if given.out == TABLES:
            return 0  # --parse writes a table only where --out names a folder
    data = table(given.engine)
    given.out.mkdir(parents=True, exist_ok=True)
    path = given.out / f"{data['engine']}-{data['version']}.json"
    path.write_text(dump(data), encoding="utf-8")
    print(f"{path}: {len(data['options'])} options of {given.engine} {data['version']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
