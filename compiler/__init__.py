"""sparkc: compile one YAML spec into launch scripts for a small multi-node GPU cluster."""

from __future__ import annotations

from importlib import metadata


def _version() -> str:
    """The installed distribution's version; a source checkout run without installing reads pyproject.toml."""
    try:
        return metadata.version("sparkc")
    except metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


__version__ = _version()
