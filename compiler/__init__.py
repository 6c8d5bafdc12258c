"""sparkc: compile one YAML spec into launch scripts for a small multi-node GPU cluster."""

from __future__ import annotations

__version__ = "0.1.0"
