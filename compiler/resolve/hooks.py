"""container.hooks in a container: the pre_engine commands run by a fixed runner before the program
the container would run anyway (the engine, `ray start`, or the image's entrypoint)."""

from __future__ import annotations

import hashlib
import json

from compiler.plan import PATCHES_MOUNT, PATCHES_PLACEHOLDER, Command, HookPlan, HostHookPlan, Words
from compiler.resolve.context import Deployment
from compiler.spec.profiles import ArgsStyle
from compiler.spec.typed import EntrypointMode

# sparkc's own text, never the user's: runs each hook (an argument) by sh -c, stops at the first that
# fails with a line naming it (the launcher looks for it in the log), then becomes the real program.
RUNNER = (
    'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do echo "sparkc: hook pre_engine[$i]: $1"; '
    'sh -c "$1" || { s=$?; echo "sparkc: hook pre_engine[$i] failed with status $s: $1" >&2; exit 97; }; '
    'i=$((i + 1)); shift; done; echo "sparkc: hooks done"; exec "$@"'
)


def hook_plan(d: Deployment) -> HookPlan | None:
    hooks = d.spec.container.hooks
    if hooks is None:
        return None
    commands = json.dumps(list(hooks.pre_engine), ensure_ascii=False, separators=(",", ":"))
    patches = d.patches
    return HookPlan(
        pre_engine=hooks.pre_engine,
        pre_engine_sha256=hashlib.sha256(commands.encode("utf-8")).hexdigest(),
        patches=patches.files if patches else (),
        patches_sha256=patches.sha256 if patches else "",
    )


def host_hook_plan(d: Deployment) -> HostHookPlan | None:
    """cluster.hooks: the commands every node's host runs before the containers, head first."""
    hooks = d.spec.cluster.hooks
    if hooks is None:
        return None
    record = json.dumps({"pre_launch": list(hooks.pre_launch), "sudo": hooks.sudo}, ensure_ascii=False, sort_keys=True)
    return HostHookPlan(
        pre_launch=hooks.pre_launch,
        sudo=hooks.sudo,
        nodes=tuple(node.name for node in d.nodes),
        sha256=hashlib.sha256(record.encode("utf-8")).hexdigest(),
    )


def patches_mount(d: Deployment) -> tuple[Words, ...]:
    if d.patches is None:
        return ()
    return (("-v", f"{PATCHES_PLACEHOLDER}:{PATCHES_MOUNT}:ro"),)


def with_hooks(d: Deployment, entry_override: str, command: Command) -> tuple[str, Command]:
    """(--entrypoint, words after the image) that run the hooks first, then what would have run."""
    hooks = d.spec.container.hooks
    if hooks is None or not hooks.pre_engine:
        return entry_override, command
    runner: Command = (("-c", RUNNER), ("sparkc-hooks", str(len(hooks.pre_engine))), *((h,) for h in hooks.pre_engine))
    if entry_override:
        return "sh", (*runner, (entry_override,), *command)
    profile = d.profile
    if profile is None or profile.args is ArgsStyle.COMMAND or d.entrypoint.mode is EntrypointMode.BYPASS:
        # The image's entrypoint (if any) runs the command as given: let it run the runner.
        return "", (("sh",), *runner, *command)
    # The entrypoint is the engine's own start: the runner ends by running it (rules ensure it is pinned).
    return "sh", (*runner, tuple(profile.entrypoint or ()), *command)
