from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


@pytest.fixture
def root() -> Path:
    return ROOT
