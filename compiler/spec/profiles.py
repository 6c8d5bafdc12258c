"""Image profiles: data files in profiles/, one per image family, validated by their own schema.

The built-in ones ship with sparkc; an operator's own (a `profiles/` folder beside the spec, or
--profiles DIR) are loaded the same way and win over a built-in one for the same image.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from compiler.diagnostics import display_path
from compiler.resources import data_dir
from compiler.spec.load import MAX_SPEC_BYTES, load_text, locate, to_plain
from compiler.spec.schema import load_schema, validate
from compiler.spec.tag_pattern import pattern_problem, version_in
from compiler.spec.typed import EngineKind, EntrypointMode
from compiler.user_files import UnreadableFile, ascii_int, read_text


class ArgsStyle(StrEnum):
    """What the image's entrypoint does with the words after the image name."""

    COMMAND = "command"  # runs them as the command
    ENGINE_ARGS = "engine-args"  # passes them to the engine it starts itself (`vllm serve` ...)
    ENV_DRIVEN = "env-driven"  # builds the engine's command from variables, appends the words


class RayPresence(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    CHECK = "check"  # depends on the release: the launcher checks the image


@dataclass(frozen=True)
class Control:
    env: str
    default: str


@dataclass(frozen=True)
class Profile:
    id: str  # file stem
    family: str
    match: tuple[str, ...]
    engine: EngineKind
    entrypoint: tuple[str, ...] | None
    args: ArgsStyle
    controls: tuple[tuple[str, Control], ...]  # effective setting -> the variable the entrypoint reads
    ray: RayPresence
    auto: EntrypointMode  # what entrypoint: auto means for this image
    side_effects: tuple[str, ...]
    notes: tuple[str, ...]
    origin: str = ""  # the file of an operator's own profile; "" for a built-in one
    version_from_tag: str | None = None  # a regular expression whose one group is the engine's version
    version_by_tag: tuple[tuple[str, str], ...] = ()  # (the tag's release, the engine release it holds)
    version: str = ""  # the engine release every tag holds; "" unknown
    ray_absent_from: tuple[int, ...] | None = None  # with ray: check, the first release without Ray
    entrypoint_sha256: str = ""  # the entrypoint file's sha256 the profile was written from; "" not recorded
    nccl_release: str = ""  # the NCCL every tag ships; "" unknown
    nccl_by_tag: tuple[tuple[str, str], ...] = ()  # (the tag's release, the NCCL it ships)
    nccl_older_than: tuple[str, str] | None = None  # (tag, NCCL): a tag before it ships an older NCCL

    def engine_version(self, image: str) -> str | None:
        """The engine's release the image holds, where its tag says it or the profile knows it."""
        if self.version_from_tag is not None:
            found = version_in(self.version_from_tag, image_tag(image))
            if found is not None:
                return found
        release = tag_release(image)
        by_tag = dict(self.version_by_tag)
        if release is not None and release in by_tag:
            return by_tag[release]
        return self.version or None

    def control(self, setting: str) -> Control | None:
        return dict(self.controls).get(setting)


class ProfileError(Exception):
    """A shipped profile file is broken: a bug in sparkc, not in the user's spec."""


@cache
def load_profiles() -> tuple[Profile, ...]:
    profiles = []
    for path in sorted(data_dir("profiles").glob("*.yaml")):
        profile, errors = _load(path.read_text(encoding="utf-8"), path.name, path.stem)
        if profile is None:
            raise ProfileError(f"profile {path.name} is invalid: {'; '.join(errors)}")
        profiles.append(profile)
    return tuple(profiles)


class UserProfileError(Exception):
    """An operator's profile folder or file cannot be used; the message names each file:line:col."""


def load_user_profiles(folder: Path) -> tuple[Profile, ...]:
    """Every *.yaml in `folder`, validated like the built-in ones; all problems of all files at once."""
    if not folder.is_dir():
        raise UserProfileError(f"{folder}: no such profiles folder")
    profiles, errors = [], []
    for path in sorted(folder.glob("*.yaml")):
        try:
            text = read_text(path, MAX_SPEC_BYTES)  # a FIFO among them must not hang the compile
        except UnreadableFile as exc:
            errors.append(str(exc))
            continue
        profile, problems = _load(text, str(path), path.stem)
        errors += problems
        if profile is not None:
            profiles.append(Profile(**{**profile.__dict__, "origin": f"{folder.name}/{path.name}"}))
    if errors:
        raise UserProfileError("\n".join(errors))
    return tuple(profiles)


def _load(text: str, filename: str, stem: str) -> tuple[Profile | None, list[str]]:
    """A profile from one file's text, or None and its problems as `file:line:col: field: message`."""
    document, problems = load_text(text, filename)
    if problems:
        return None, [f"{filename}:{d.line}:{d.column}: {d.message}" for d in problems]
    data: Any = to_plain(document.data)
    errors = []
    for d in validate(data, load_schema("profile.schema.json")):
        line, column = locate(document.data, d.path, at_key=d.at_key)
        errors.append(f"{filename}:{line}:{column}: {display_path(d.path, data)}: {d.message}")
    for path, problem in _value_problems(data):
        line, column = locate(document.data, path)
        errors.append(f"{filename}:{line}:{column}: {display_path(path, data)}: {problem}")
    if errors:
        return None, errors
    nccl = data.get("nccl", {})
    return (
        Profile(
            id=stem,
            family=data["family"],
            match=tuple(data["match"]),
            engine=EngineKind(data["engine"]),
            entrypoint=tuple(data["entrypoint"]) if "entrypoint" in data else None,
            args=ArgsStyle(data["args"]),
            controls=tuple(sorted((k, Control(**v)) for k, v in data.get("controls", {}).items())),
            ray=RayPresence(data["ray"]),
            auto=EntrypointMode(data["auto"]),
            side_effects=tuple(data.get("side_effects", ())),
            notes=tuple(data.get("notes", ())),
            version_from_tag=data.get("engine_version", {}).get("from_tag"),
            version_by_tag=tuple(sorted(data.get("engine_version", {}).get("by_tag", {}).items())),
            version=data.get("engine_version", {}).get("release", ""),
            ray_absent_from=_version(data["ray_absent_from"]) if "ray_absent_from" in data else None,
            entrypoint_sha256=data.get("entrypoint_sha256", ""),
            nccl_release=nccl.get("release", ""),
            nccl_by_tag=tuple(sorted(nccl.get("by_tag", {}).items())),
            nccl_older_than=(older["tag"], older["release"]) if (older := nccl.get("older_than")) else None,
        ),
        [],
    )


# What the entrypoint's default of each setting must be for sparkc to reason about it (the port it
# listens on, the memory it takes); the schema's text alone lets `abc` through.
def _port(value: str) -> bool:
    number = ascii_int(value, 5)
    return number is not None and 0 < number < 65536


def _fraction(value: str) -> bool:
    return re.fullmatch(r"0?\.[0-9]{1,6}|1(?:\.0{1,6})?", value) is not None and float(value) > 0


_DEFAULT_FORMS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "port": ("a port from 1 to 65535 in ASCII digits", _port),
    "max_model_len": ("a whole number of tokens in ASCII digits", lambda value: ascii_int(value, 9) is not None),
    "gpu_memory_utilization": ("a fraction above 0 and at most 1 (0.85)", _fraction),
}


def _value_problems(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """What the schema cannot say: each control's default in the form its setting needs, and a from_tag
    pattern that matches fast and has the one group."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for setting, control in data.get("controls", {}).items():
        form = _DEFAULT_FORMS.get(setting)
        if form is not None and not form[1](control["default"]):
            found.append((("controls", setting, "default"), f"{control['default']!r} is not {form[0]}"))
    pattern = data.get("engine_version", {}).get("from_tag")
    problem = pattern_problem(pattern) if pattern is not None else None
    if problem is not None:
        found.append((("engine_version", "from_tag"), problem))
    return found


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def ray_presence(profile: Profile, image: str) -> RayPresence:
    """Whether this image, by its tag, has Ray: a `check` profile that knows the first release without
    Ray answers `absent` for tags that name it or a later one (26.05-py3); other tags stay `check`."""
    if profile.ray is not RayPresence.CHECK or profile.ray_absent_from is None:
        return profile.ray
    release = tag_release(image)
    if release is None:
        return RayPresence.CHECK
    # Older releases may or may not have it: the launcher still checks.
    return RayPresence.ABSENT if _version(release) >= profile.ray_absent_from else RayPresence.CHECK


def tag_release(image: str) -> str | None:
    """The dotted number a tag starts with (`26.05` for `26.05-py3`), or None."""
    match = re.match(r"([0-9]+(?:\.[0-9]+)*)(?:[-_.]|$)", image_tag(image))
    return match.group(1) if match else None


@dataclass(frozen=True)
class NcclRelease:
    """What a profile knows of the NCCL an image ships: that release, or (older) one before it."""

    release: str
    older: bool = False

    def below(self, wanted: str) -> bool:
        """Whether this NCCL is older than `wanted` (2.30.7)."""
        have = _version(self.release)
        return have <= _version(wanted) if self.older else have < _version(wanted)

    def __str__(self) -> str:
        return f"older than {self.release}" if self.older else self.release


def nccl_release(profile: Profile, image: str) -> NcclRelease | None:
    """The NCCL the image ships, as its profile knows it for this tag; None when unknown."""
    if profile.nccl_release:
        return NcclRelease(profile.nccl_release)
    release = tag_release(image)
    if release is None:
        return None
    known = dict(profile.nccl_by_tag)
    if release in known:
        return NcclRelease(known[release])
    older = profile.nccl_older_than
    if older is not None and _version(release) < _version(older[0]):
        return NcclRelease(older[1], older=True)
    return None


def repository(image: str) -> str:
    """`docker.io/library/x:tag@sha256:..` -> `x`: the repository part that profiles match on."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.lower()


def image_tag(image: str) -> str:
    """`repo:v0.11.2@sha256:..` -> `v0.11.2`; "" without a tag."""
    name = image.split("@", 1)[0]
    last = name.rpartition("/")[2]
    return last.partition(":")[2]


def find_profile(image: str, own: tuple[Profile, ...] = ()) -> Profile | None:
    """The operator's own profile for the image if one matches, else the built-in one."""
    repo = repository(image)
    return next((p for p in (*own, *load_profiles()) if repo in p.match), None)


def overridden(profile: Profile) -> Profile | None:
    """The built-in profile an operator's own one takes the place of, if any."""
    if not profile.origin:
        return None
    return next((p for p in load_profiles() if set(p.match) & set(profile.match)), None)
