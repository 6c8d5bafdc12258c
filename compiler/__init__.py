"""sparkc: compile one YAML spec into launch scripts for a small multi-node GPU cluster."""

from __future__ import annotations

from pathlib import Path


def _version() -> str:
    """The installed distribution's version, from its metadata; a source checkout never installed reads
    pyproject.toml. An installed wheel's METADATA sits beside the package: read directly, it costs far less
    than importing importlib.metadata, which every `sparkc` run would pay."""
    package = Path(__file__).resolve().parent
    for metadata_file in sorted(package.parent.glob("sparkc-*.dist-info/METADATA")):
        with metadata_file.open(encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
                if not line.strip():  # the headers end at the first empty line
                    break
    from importlib import metadata

    try:
        return metadata.version("sparkc")  # an editable install: its metadata lives elsewhere
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = package.parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


__version__ = _version()
