"""Names a secret may not take, because something else already means them (kept in compiler/names.py,
which the renderer reads too)."""

from compiler.names import RESERVED_PREFIXES, SHELL_NAMES, is_reserved

__all__ = ["RESERVED_PREFIXES", "SHELL_NAMES", "is_reserved"]
