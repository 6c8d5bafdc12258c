"""Names a secret may not take, because something else already means them (kept in compiler/names.py,
which the renderer reads too)."""

from compiler.names import SCRIPT_NAMES, SHELL_NAMES

__all__ = ["SCRIPT_NAMES", "SHELL_NAMES"]
