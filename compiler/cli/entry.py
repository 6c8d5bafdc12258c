"""The `sparkc` program (console script and `python -m compiler`).

Importing the command line (click, jinja2, jsonschema, ruamel) takes a noticeable moment; a Ctrl-C
then must end like one during a compile: "interrupted", exit 130, no traceback. So this module
imports nothing heavy at its top and brings the rest in inside the handler.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

EXIT_INTERRUPTED = 130


def run() -> NoReturn:
    try:
        from compiler.cli.main import main

        code = main()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a late Ctrl-C must not kill a finished run
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the goodbye
        sys.stderr.write("interrupted\n")
        code = EXIT_INTERRUPTED
    sys.exit(code)
