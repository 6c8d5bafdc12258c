"""Draft an image profile from what `docker image inspect` says about the image.

Metadata tells what the entrypoint is, not what it does with the words after the image: the draft
guesses from names, marks every guess REVIEW, and picks the choice that is safe until a person has
read the entrypoint (auto: bypass).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compiler.spec.profiles import repository
from compiler.user_files import BadJson, loads_json

# Variable names env-driven entrypoints have been seen to read, per setting sparkc controls.
CONTROL_NAMES = {
    "model_path": ("MODEL_PATH", "MODEL", "MODEL_NAME"),
    "host": ("HOST",),
    "port": ("PORT", "VLLM_PORT", "SERVER_PORT"),
    "max_model_len": ("MAX_MODEL_LEN", "CONTEXT_LENGTH"),
    "gpu_memory_utilization": ("GPU_MEMORY_UTIL", "GPU_MEMORY_UTILIZATION"),
}


class InspectError(Exception):
    """The inspect output is not what `docker image inspect` prints."""


@dataclass(frozen=True)
class ImageFacts:
    image: str
    image_id: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: dict[str, str]
    ports: tuple[str, ...]
    workdir: str
    labels: dict[str, str]


def parse_inspect(text: str, image: str, source: str = "docker image inspect") -> ImageFacts:
    """`docker image inspect IMAGE` output (a JSON list of one object, or the object itself); `source`
    names where it was read, in a message."""
    try:
        data: Any = loads_json(text, source)  # deep nesting or a 5,000-digit number: refused, not a crash
    except BadJson as exc:
        raise InspectError(str(exc)) from None
    if isinstance(data, list):
        if len(data) != 1:
            raise InspectError(f"expected the inspect output of one image, found {len(data)}")
        data = data[0]
    config = data.get("Config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise InspectError("no Config object: pass what `docker image inspect IMAGE` prints")
    env = {}
    for item in _strings(config.get("Env")):
        name, _, value = item.partition("=")
        env[name] = value
    ports = config.get("ExposedPorts")
    labels = config.get("Labels")
    return ImageFacts(
        image=image,
        image_id=str(data.get("Id", "")),
        entrypoint=_strings(config.get("Entrypoint")),
        cmd=_strings(config.get("Cmd")),
        env=env,
        ports=tuple(sorted(ports)) if isinstance(ports, dict) else (),
        workdir=str(config.get("WorkingDir") or ""),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
    )


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def draft(facts: ImageFacts, entrypoint_sha256: str = "") -> str:
    """The profile as YAML text with review comments; valid against schemas/profile.schema.json.
    `entrypoint_sha256`: the entrypoint file's, read from the image (the launcher compares it)."""
    repo = repository(facts.image)
    words = " ".join((*facts.entrypoint, *facts.cmd, *facts.labels.values(), repo)).lower()
    engine = "sglang" if "sglang" in words else "vllm"
    controls = {s: n for s, names in CONTROL_NAMES.items() for n in names if n in facts.env}
    args, why = _args_style(facts, controls)
    out = [
        "# yaml-language-server: $schema=https://sparkc.dev/schemas/profile.schema.json",
        f"# Drafted by `sparkc profile` from docker image inspect of {_flat(facts.image)}",
        f"# (image ID {_flat(facts.image_id) or 'unknown'}). Save it as profiles/NAME.yaml beside your spec.",
        "# REVIEW every line marked so: the metadata says what the entrypoint is, not what it does with",
        "# the words after the image. Read it (docker run --rm --entrypoint cat IMAGE <entrypoint path>).",
        f"family: {_yaml(repo + ' (drafted, not yet reviewed)')}",
        f"match: [{_yaml(repo)}]",
        f"engine: {engine}  # REVIEW: guessed from the image's name, entrypoint and labels",
    ]
    if facts.entrypoint:
        out.append(f"entrypoint: {_yaml(list(facts.entrypoint))}  # as docker reports it; checked at launch")
        if entrypoint_sha256:
            out.append(
                f"entrypoint_sha256: {entrypoint_sha256}  # of {_flat(facts.entrypoint[0])}; a change stops the launch"
            )
        elif facts.entrypoint[0].startswith("/"):
            out.append(
                f"# entrypoint_sha256: run sparkc profile {_flat(facts.image)} where docker has the image to record it"
            )
    else:
        out.append("# entrypoint: the image has none, so none is pinned")
    out.append(f"args: {args}  # REVIEW: {why}")
    if args == "env-driven":
        out.append("controls:  # REVIEW: the variables the entrypoint reads instead of the command line")
        for setting, name in sorted(controls.items()):
            out.append(f"  {setting}: {{env: {name}, default: {_yaml(facts.env[name])}}}")
    out += [
        "ray: check  # the launcher checks the image for Ray before a Ray launch",
        "auto: bypass  # REVIEW: safe until the entrypoint is understood; keep or adapt once it is",
        "notes:",
    ]
    facts_seen = [f"Cmd: {json.dumps(list(facts.cmd))}"] if facts.cmd else []
    facts_seen += [f"exposed ports: {', '.join(facts.ports)}"] if facts.ports else []
    facts_seen += [f"working directory: {facts.workdir}"] if facts.workdir else []
    facts_seen += [f"the image sets {name}={facts.env[name]}" for name in sorted(set(controls.values()))]
    out += [f"  - {_yaml(_flat(note))}" for note in facts_seen] or ["  - drafted; nothing notable in the metadata"]
    out += ["sources:", f"  - {_yaml(_flat('docker image inspect ' + facts.image))}"]
    return "\n".join(out) + "\n"


def _args_style(facts: ImageFacts, controls: dict[str, str]) -> tuple[str, str]:
    entry = facts.entrypoint
    if len(entry) >= 2 and entry[0].endswith("vllm") and entry[1] == "serve":
        return "engine-args", "the entrypoint is `vllm serve`: the words after the image are its flags"
    if entry and entry[0].endswith(".sh") and controls:
        names = ", ".join(sorted(controls.values()))
        return "env-driven", f"a script entrypoint and the image sets {names}: it may build its own engine command"
    if entry:
        return "command", "assumed to run the words after the image as the command"
    return "command", "no entrypoint: docker runs the words after the image as the command"


def _flat(text: str) -> str:
    """One line: metadata may hold anything, a comment or note must not break the YAML."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _yaml(value: Any) -> str:
    """A YAML scalar or flow list: JSON's quoting is valid YAML and leaves no room for tags or anchors."""
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return json.dumps(_flat(str(value)), ensure_ascii=False)
