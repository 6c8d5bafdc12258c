"""Where the data folders are: beside the package when installed, at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`templates`, `runtime`, `schemas`, `profiles` or `flag_tables`."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"sparkc data folder '{name}' is missing from the installation")


def compiled_templates() -> Path:
    """Where a built sparkc keeps its templates compiled to Python: inside the package (setup.py writes it; a
    source checkout has none)."""
    return _PACKAGE / "templates_compiled"
