"""Image profiles: data files in profiles/, one per image family, validated by their own schema."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from compiler.loader import load_text, to_plain
from compiler.resources import data_dir
from compiler.schema import load_schema
from compiler.spec import EngineKind, EntrypointMode


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

    def control(self, setting: str) -> Control | None:
        return dict(self.controls).get(setting)


class ProfileError(Exception):
    """A shipped profile file is broken: a bug in sparkc, not in the user's spec."""


@cache
def load_profiles() -> tuple[Profile, ...]:
    from jsonschema import Draft202012Validator  # here, not at the top: `sparkc --help` never needs it

    validator = Draft202012Validator(load_schema("profile.schema.json"))
    profiles = []
    for path in sorted(data_dir("profiles").glob("*.yaml")):
        document, problems = load_text(path.read_text(encoding="utf-8"), path.name)
        data = to_plain(document.data)
        errors = [e.message for e in problems] + [e.message for e in validator.iter_errors(data)]
        if errors:
            raise ProfileError(f"profile {path.name} is invalid: {'; '.join(errors)}")
        profiles.append(
            Profile(
                id=path.stem,
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
            )
        )
    return tuple(profiles)


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


def find_profile(image: str) -> Profile | None:
    repo = repository(image)
    return next((p for p in load_profiles() if repo in p.match), None)
