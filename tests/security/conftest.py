from __future__ import annotations

import os
import shlex
import sys

import pytest

from tests.fakes.cluster import BIN


@pytest.fixture(scope="session")
def fake_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH for scripts run on the fakes: the fake ssh, docker and ip first, then a `python3` that is this
    interpreter without `site` (the fakes use the standard library only and start thousands of times
    here; the site-packages' .pth hooks would triple each start)."""
    python_dir = tmp_path_factory.mktemp("python")
    python3 = python_dir / "python3"
    python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n', encoding="utf-8")
    python3.chmod(0o755)
    return os.pathsep.join([str(BIN), str(python_dir), os.environ["PATH"]])
