"""The package list, found in the tree: pyproject.toml alone cannot combine a found package list with
data folders mapped into the package (templates/ -> compiler/templates)."""

import shutil
from pathlib import Path

from setuptools import find_packages, setup

BUILD_BASE = Path(__file__).resolve().parent / ".setuptools-build"

# setuptools never removes what an earlier build left in its build folder, so a module deleted from the
# tree would still ship in a wheel built in this work tree: every build starts from an empty folder.
shutil.rmtree(BUILD_BASE, ignore_errors=True)

setup(
    packages=[
        *find_packages(include=["compiler", "compiler.*"]),
        "compiler.templates",
        "compiler.schemas",
        "compiler.profiles",
        "compiler.flag_tables",
    ],
)
