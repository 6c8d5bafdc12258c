"""A spark-vllm-docker recipe's build_args as container.build. They are options of its build-and-copy.sh,
which builds the repository's Dockerfile with `docker build -t IMAGE --build-arg ...` and copies the image to
the other nodes; sparkc's build-image.sh runs that docker build on the head and distribute.sh the copy.
Each option is read as the script reads it: the Dockerfile it picks and the build arguments it passes."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from compiler.spec.load import kind_of
from compiler.tools.importer.output import PLACEHOLDER, Notes, shown

# Where build-and-copy.sh runs: the root of a checkout of the recipes' repository, its build context.
CONTEXT = f"/{PLACEHOLDER}/spark-vllm-docker"
# Options that pick the Dockerfile (build-and-copy.sh's -f words) or pass fixed build arguments.
_SWITCHES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "--pre-tf": (None, ("PRE_TRANSFORMERS=1",)),
    "--pre-transformers": (None, ("PRE_TRANSFORMERS=1",)),
    "--tf5": (None, ("PRE_TRANSFORMERS=1",)),
    "--pre-flashinfer": (None, ("FLASHINFER_PRE=--pre",)),
    "--exp-mxfp4": ("Dockerfile.mxfp4", ()),
    "--experimental-mxfp4": ("Dockerfile.mxfp4", ()),
}
# Options whose value becomes a build argument.
_VALUES = {
    "--vllm-ref": "VLLM_REF",
    "--triton-ref": "TRITON_REF",
    "--flashinfer-ref": "FLASHINFER_REF",
    "-j": "BUILD_JOBS",
    "--build-jobs": "BUILD_JOBS",
}
# Options about what sparkc does otherwise: the tag (container.image), the copy (distribute.sh), its ssh user.
_OWN_VALUES = {"-t", "--tag", "-u", "--user"}
_OWN_SWITCHES = {"--copy-parallel"}
_COPY = {"-c", "--copy-to", "--copy-to-host", "--copy-to-hosts"}
# Options that only bust docker's layer cache (a build argument set to the time): build-image.sh builds with
# docker's cache, which rebuilds what changed.
_CACHE = {"--rebuild-deps", "--rebuild-vllm", "--rebuild-flashinfer"}


def build_from_args(recipe: dict[str, Any], fields: dict[str, Any], warnings: Notes) -> None:
    """`build_args` as fields["container.build"]; an option with no docker build equivalent is an error."""
    raw = recipe.get("build_args")
    if not raw:
        return
    if not isinstance(raw, (list, str)):
        warnings.error(("build_args",), f"{kind_of(raw)}; write build-and-copy.sh's options as a list")
        return
    words = [str(w) for w in raw] if isinstance(raw, list) else shlex.split(raw)
    build = _Build()
    i = 0
    while i < len(words):
        used = _option(words[i], words[i + 1 :], build, warnings)
        if used is None:
            return
        i += 1 + used
    fields["container.build"] = {"context": CONTEXT, "dockerfile": build.dockerfile, "args": build.args}


@dataclass
class _Build:
    dockerfile: str = "Dockerfile"
    args: dict[str, str] = field(default_factory=dict)


def _option(word: str, rest: list[str], build: _Build, warnings: Notes) -> int | None:
    """One option of build-and-copy.sh into `build`: how many of the words after it it took (None: an error)."""
    value = rest[0] if rest else None
    if word in _SWITCHES:
        picked, fixed = _SWITCHES[word]
        build.dockerfile = picked or build.dockerfile
        build.args.update(arg.split("=", 1) for arg in fixed)  # type: ignore[misc]
        return 0
    if word == "--use-wheels":  # its mode, nightly (the default) or release, is optional
        build.dockerfile = "Dockerfile.wheels"
        if value == "release":
            build.args["WHEELS_FROM_GITHUB_RELEASE"] = "1"
        return 1 if value in ("nightly", "release") else 0
    if word in _VALUES or word in _OWN_VALUES:
        if value is None or value.startswith("-"):
            warnings.error(("build_args",), f"{word} needs a value, as build-and-copy.sh reads it")
            return None
        if word in _VALUES:
            build.args[_VALUES[word]] = value
        return 1
    if word in _COPY:  # the hosts after it: distribute.sh copies to every node of the spec
        return next((n for n, w in enumerate(rest) if w.startswith("-")), len(rest))
    if word in _CACHE:
        warnings.add(
            ("build_args",),
            f"{word}: build-image.sh builds with docker's layer cache, which rebuilds what changed; to rebuild "
            "from scratch, remove the image's cached layers (docker builder prune) first",
        )
        return 0
    if word in _OWN_SWITCHES:
        return 0
    warnings.error(
        ("build_args",),
        f"{shown(word)}: not an option sparkc can carry into docker build (build-and-copy.sh's --pre-tf, --tf5, "
        "--pre-flashinfer, --exp-mxfp4, --use-wheels, --vllm-ref, --triton-ref, --flashinfer-ref and -j are); "
        "build the image by hand and remove build_args",
    )
    return None
