"""Rules about what is done to the image before the engine starts: container.hooks (the patch folder can be
read, the hooks can run before the entrypoint) and container.build (no secret among its build arguments)."""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error
from compiler.names import SECRET_NAME
from compiler.plan import PATCHES_MOUNT
from compiler.resolve.context import Deployment
from compiler.spec.profiles import ArgsStyle
from compiler.spec.typed import EntrypointMode


def patch_folder(d: Deployment) -> Iterator[Diagnostic]:
    hooks = d.spec.container.hooks
    if hooks is None or hooks.patches is None:
        return
    if d.patches is None or d.patches.problem:
        problem = d.patches.problem if d.patches else f"the patch folder {hooks.patches} was not read"
        yield error(hooks.at("patches"), problem)
    for mount in d.spec.container.mounts:
        if mount.container.rstrip("/") == PATCHES_MOUNT:
            yield error(mount.at("container"), f"{PATCHES_MOUNT} is where the hooks' patch folder is mounted")


def entrypoint_known(d: Deployment) -> Iterator[Diagnostic]:
    """Hooks run before the image's entrypoint where it starts the engine itself: sparkc must know it."""
    hooks, profile = d.spec.container.hooks, d.profile
    if hooks is None or not hooks.pre_engine or profile is None or d.entrypoint.mode is EntrypointMode.BYPASS:
        return
    if profile.args is not ArgsStyle.COMMAND and not profile.entrypoint:
        yield error(
            hooks.at("pre_engine"),
            f"hooks run before the image's entrypoint, but profile {profile.id} does not say what it is; "
            "add its entrypoint to the profile, or use entrypoint: bypass",
        )


def build_args_hold_no_secret(d: Deployment) -> Iterator[Diagnostic]:
    """A build argument is a word of docker build's command line, and docker keeps it in the image's history."""
    build = d.spec.container.build
    if build is None:
        return
    for name in build.args:
        if SECRET_NAME.search(name.upper()):
            yield error(
                build.at("args", name),
                f"{name} looks like a secret: a build argument is on docker build's command line and stays in the "
                "image's history (docker history); build the image by hand with a build secret (docker build "
                "--secret) and remove it here",
            )


RULES = (patch_folder, entrypoint_known, build_args_hold_no_secret)
