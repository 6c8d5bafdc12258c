"""Where sparkc keeps what it may reuse between runs, and the one way it writes there.

Everything kept is an optimisation: a cache folder that is missing, unwritable, full or garbled makes a
compile slower, never wrong and never failed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cache_home() -> Path | None:
    """$XDG_CACHE_HOME/sparkc, else ~/.cache/sparkc; None where neither can be named."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME", ""))
    if xdg.is_absolute():  # the XDG rule: a relative value is ignored
        return xdg / "sparkc"
    try:
        return Path.home() / ".cache" / "sparkc"
    except (RuntimeError, KeyError, OSError):
        return None


def write_quietly(path: Path, content: bytes) -> None:
    """Write `path` whole or not at all (a temporary file renamed over it); every OSError is swallowed."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary.write_bytes(content)
        temporary.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
