"""What a recipe's launcher does in the containers before its engine starts: mods (scripts and files applied
in the container) and sparkrun's pre_exec commands, carried as container.hooks where they can be (build_args,
the image's build, is compiler/tools/importer/build_args.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path as FilePath
from typing import Any

from compiler.plan import PATCHES_MOUNT
from compiler.spec.load import kind_of
from compiler.spec.patches import MAX_BYTES, MAX_FILES
from compiler.tools.importer.output import RECIPE_KEY, Notes, shown
from compiler.tools.recipe_mods import MOD_HOME, Mod, patch_files, read_mod

# A command word that names a file by a relative path (`unsloth.jinja`, `tool_parser.py`): a file in the
# container's working folder, which an eugr mod puts there.
_RELATIVE_FILE = re.compile(r"[\w.-]+(?:/[\w.-]+)*\.(?:jinja|j2|json|py|yaml|yml|txt|tiktoken|model)")


def pre_exec(recipe: dict[str, Any], values: dict[Any, Any], warnings: Notes) -> list[str]:
    """sparkrun's pre_exec: commands its launcher runs by `bash -c` inside every container before the engine,
    `{key}` filled from the recipe's values. Carried as pre_engine hooks, which run at the same point; a
    `copy` of files from the launching machine is refused with the patch folder to use instead."""
    raw = recipe.get("pre_exec")
    listed = raw if isinstance(raw, list) else [raw] if raw else []
    commands = []
    for i, entry in enumerate(listed):
        if isinstance(entry, dict) and "copy" in entry:
            warnings.error(
                ("pre_exec", i),
                f"copies {shown(entry['copy'])} from the machine that runs the launcher into the containers: put "
                "those files in a folder beside the spec, name it in container.hooks.patches, and copy them from "
                f"{PATCHES_MOUNT} to {shown(entry.get('dest', MOD_HOME))} with a container.hooks.pre_engine command",
            )
            continue
        if not isinstance(entry, str):
            warnings.error(("pre_exec", i), f"{kind_of(entry)}, not a command; write it as a shell command")
            continue
        unfilled = sorted({m.group(0) for m in RECIPE_KEY.finditer(entry) if m.group(1) not in values})
        if unfilled:
            warnings.error(
                ("pre_exec", i),
                f"{', '.join(unfilled)}: the recipe's defaults give no value; write the value into the command",
            )
            continue
        filled = RECIPE_KEY.sub(lambda m: str(values[m.group(1)]), entry)
        commands.append(shlex.join(["bash", "-c", filled]))  # its launcher runs it with bash, not sh
    return commands


def mods(
    recipe: dict[str, Any],
    args: list[str],
    fields: dict[str, Any],
    warnings: Notes,
    recipes_dir: FilePath | None,
    patches: str | None,
) -> dict[str, bytes]:
    """spark-vllm-docker's mods as container.hooks (their files into the patch folder `patches`) where the
    recipe's repository is at hand; else an error where the command needs what a mod makes, a warning otherwise."""
    raw = recipe.get("mods")
    listed = raw if isinstance(raw, list) else [raw] if raw else []
    if not listed:
        return {}
    if recipes_dir is None:
        _mods_lost(listed, args, warnings)
        return {}
    found = _read_mods(listed, recipes_dir, warnings)
    if found is None:
        return {}
    if patches is None:
        warnings.error(("mods",), "the mods' files are written beside the spec: give the spec's file with -o SPEC")
        return {}
    files = patch_files(found)
    if isinstance(files, str):
        warnings.error(("mods",), files)
        return {}
    fields["container.hooks"] = {"pre_engine": [mod.command for mod in found], "patches": patches}
    return {f"{patches}/{path}": data for path, data in files.items()}


def _read_mods(listed: list[Any], recipes_dir: FilePath, warnings: Notes) -> list[Mod] | None:
    """Each listed mod, each folder read once and all of them together at most one patch folder's size
    (a mod named a thousand times is read once, and reading stops where they no longer fit); None: an error."""
    if len(listed) > MAX_FILES:
        warnings.error(("mods",), f"{len(listed)} mods; a patch folder holds at most {MAX_FILES} files")
        return None
    read: dict[str, Mod | str] = {}
    found: list[Mod] = []
    total = 0
    for i, mod in enumerate(listed):
        if not isinstance(mod, str):
            warnings.error(("mods", i), f"{kind_of(mod)}, not a mod's folder")
            continue
        key = mod.rstrip("/")
        if key not in read:
            read[key] = read_mod(recipes_dir, mod)
            total += _size(read[key])
        this = read[key]
        if isinstance(this, str):
            warnings.error(("mods", i), this)
        elif total > MAX_BYTES:
            warnings.error(("mods", i), f"the mods hold over {MAX_BYTES // 2**20} MiB: build them into the image")
            return None
        else:
            found.append(this)
    return found if len(found) == len(listed) else None


def _size(mod: Mod | str) -> int:
    return sum(len(data) for data in mod.files.values()) if isinstance(mod, Mod) else 0


def _mods_lost(listed: list[Any], args: list[str], warnings: Notes) -> None:
    needed = [w for w in args if _RELATIVE_FILE.fullmatch(w)]
    carry = "give the recipe's repository (a checkout of it) with --recipes-dir to carry the mods as container.hooks"
    for i, mod in enumerate(listed):
        if needed:
            warnings.error(
                ("mods", i),
                f"the command names {', '.join(needed)}, which the mod {mod} puts into the container: {carry}",
            )
        else:
            warnings.add(("mods", i), f"the mod {mod} is not applied, so what it patches is lost: {carry}")
