"""The package list, found in the tree: pyproject.toml alone cannot combine a found package list with
data folders mapped into the package (templates/ -> compiler/templates). The build also compiles the
templates to Python modules (compiler/templates_compiled/, see compiler/output/render.py's environment)."""

import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BUILD_BASE = HERE / ".setuptools-build"

# setuptools never removes what an earlier build left in its build folder, so a module deleted from the
# tree would still ship in a wheel built in this work tree: every build starts from an empty folder.
shutil.rmtree(BUILD_BASE, ignore_errors=True)


class BuildWithCompiledTemplates(build_py):
    """build_py, then the templates compiled by the same Jinja environment a compile uses."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads templates/ from the tree
            return
        sys.path.insert(0, str(HERE))
        from compiler.output.render import compile_templates

        compile_templates(Path(self.build_lib) / "compiler" / "templates_compiled")


setup(
    packages=[
        *find_packages(include=["compiler", "compiler.*"]),
        "compiler.templates",
        "compiler.runtime",
        "compiler.schemas",
        "compiler.profiles",
        "compiler.flag_tables",
    ],
    cmdclass={"build_py": BuildWithCompiledTemplates},
)
