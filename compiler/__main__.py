from __future__ import annotations

from compiler.cli.entry import run

run()
