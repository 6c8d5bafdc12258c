"""spark-vllm-docker's mods, carried by `sparkc import --recipes-dir`: each mod is a folder of its
repository (`mods/<name>/` with a `run.sh` and the files it applies) that the recipe's launcher copies into
every container at /workspace/mods/<name> and runs there, before the engine starts.

sparkc carries a mod as container.hooks: the mods' files go into one patch folder beside the spec (one
subfolder per mod, read with the patch folder's own rules), and a pre_engine command per mod copies its
subfolder to the same place and runs its run.sh as the recipe's launcher does: from the mod's folder, with
WORKSPACE_DIR set to the container's working folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from compiler.plan import PATCHES_MOUNT
from compiler.spec.patches import MAX_BYTES, MAX_FILES, read_patch_folder

# Where spark-vllm-docker's launch-cluster.sh puts a mod in the container, and runs it from.
MOD_HOME = "/workspace/mods"
# A mod's folder name reaches a shell command: only names that need no quoting.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Mod:
    name: str  # the folder's own name, as the recipe's launcher names it in the container
    files: dict[str, bytes]  # path inside the mod's folder -> bytes

    @property
    def command(self) -> str:
        """The pre_engine hook: the mod copied where its launcher puts it, its run.sh run there with
        WORKSPACE_DIR naming the container's working folder (where the hook starts, and the engine too),
        as the recipe's launcher exports it: mods write the files the engine's flags name by a relative
        path into "$WORKSPACE_DIR"."""
        source, home = f"{PATCHES_MOUNT}/{self.name}", f"{MOD_HOME}/{self.name}"
        return (
            f'export WORKSPACE_DIR="$PWD" && mkdir -p {MOD_HOME} && cp -R {source} {MOD_HOME}/ && cd {home} '
            "&& chmod +x run.sh && ./run.sh"
        )


def read_mod(recipes_dir: Path, given: str) -> Mod | str:
    """The mod the recipe names (`mods/fix-x`, relative to its repository), or why it cannot be carried."""
    where = f"the mod {given} (read in --recipes-dir {recipes_dir})"
    if given.endswith(".zip"):
        return f"{where} is a zip file: unzip it into a folder of the repository and name the folder in the recipe"
    name = given.rstrip("/").rsplit("/", 1)[-1]
    if not _NAME.fullmatch(name):
        return f"{where}: its folder name {name!r} needs quoting in a shell; rename the folder (letters, digits, . _ -)"
    # sparkrun names a mod by its folder under the repository's mods/ (`fix-x`), spark-vllm-docker by its
    # path from the repository (`mods/fix-x`); sparkrun reads both in mods/.
    path = given.rstrip("/")
    if not path.startswith("mods/") and not (recipes_dir / path).is_dir():
        path = f"mods/{path}"
    folder = read_patch_folder(recipes_dir, path)
    if folder.problem:
        # The patch folder's words name the spec's folder; a mod's folder is in the recipe's repository.
        problem = folder.problem.replace("patch folder", "mod").replace("beside the spec", "in that repository")
        return f"{where}: {problem}"
    files = {f.path: text.encode("utf-8") for f, text in zip(folder.files, folder.texts, strict=True)}
    if "run.sh" not in files:
        return f"{where} has no run.sh: a spark-vllm-docker mod is a folder with a run.sh that applies it"
    return Mod(name, files)


def patch_files(mods: list[Mod]) -> dict[str, bytes] | str:
    """Every mod's files as one patch folder (`<mod>/<path>`), or why they do not fit in one."""
    names = [mod.name for mod in mods]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return f"two mods have the folder name {', '.join(twice)}; their launcher would put them in one place"
    files = {f"{mod.name}/{path}": data for mod in mods for path, data in mod.files.items()}
    size = sum(len(data) for data in files.values())
    if len(files) > MAX_FILES or size > MAX_BYTES:
        return (
            f"the mods hold {len(files)} files, {size} bytes; a patch folder holds at most {MAX_FILES} files, "
            f"{MAX_BYTES // 1024 // 1024} MiB: build the mods into the image instead"
        )
    return files
