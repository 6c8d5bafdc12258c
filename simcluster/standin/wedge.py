"""The wedge multi-node vLLM on Ray shows after some requests: a generation is accepted and never
answered (no status line, no byte), while /health keeps answering.

After N generations answered, every later one hangs. N comes from SPARKC_STANDIN_WEDGE_AFTER, or from a
control file (SPARKC_STANDIN_WEDGE_FILE, default /tmp/sparkc-standin-wedge in the container) holding N,
read at each request, so that a test can wedge a running engine (`echo 0 > FILE`: at the next one).
"""

from __future__ import annotations

import os
import threading
import time

from . import log

DEFAULT_FILE = "/tmp/sparkc-standin-wedge"
_lock = threading.Lock()
_answered = 0
_said = False


def _limit() -> int | None:
    path = os.environ.get("SPARKC_STANDIN_WEDGE_FILE", DEFAULT_FILE)
    for raw in (_read(path), os.environ.get("SPARKC_STANDIN_WEDGE_AFTER", "")):
        if raw.strip().isdigit():
            return int(raw.strip())
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(32)
    except OSError:
        return ""


def hold_if_wedged() -> None:
    """Called once per generation request, after its body was read: returns to answer it, or never."""
    global _answered, _said
    limit = _limit()
    with _lock:
        if limit is None or _answered < limit:
            _answered += 1
            return
        if not _said:
            log.info(f"sparkc-standin: wedged after {_answered} generation(s); /health still answers")
            _said = True
    while True:  # the request stays accepted and unanswered, as the real one does
        time.sleep(3600)
