"""What the engine will really use for port, host, model path and the rest, given the image's entrypoint.

A known image's entrypoint may build the engine's command from variables and ignore the words
sparkc passes (seed: asked for port 30000, got 8000). bypass runs the engine directly; adapt sets
the variables the entrypoint reads; keep lets it decide and records what it will decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from compiler.diagnostics import Path
from compiler.plan import Effective, Setting
from compiler.spec.profiles import ArgsStyle, Profile, load_profiles
from compiler.spec.typed import EntrypointMode, Source, Spec

# The settings an entrypoint can take over, in the order they are reported.
SETTINGS = ("model_path", "host", "port", "max_model_len", "gpu_memory_utilization")


@dataclass(frozen=True)
class Requested:
    value: str  # "" when the spec leaves it to the engine
    source: Source


@dataclass(frozen=True)
class Entrypoint:
    mode: EntrypointMode  # never auto
    effective: tuple[Effective, ...]  # SETTINGS, then served_model_name
    adapt_env: tuple[Setting, ...]  # adapt: the variables set so the entrypoint follows the spec

    def value(self, setting: str) -> str:
        return next(e.effective for e in self.effective if e.setting == setting)

    def of(self, setting: str) -> Effective:
        return next(e for e in self.effective if e.setting == setting)


def decide_mode(spec: Spec, profile: Profile | None) -> EntrypointMode:
    mode = spec.container.entrypoint
    if mode is EntrypointMode.AUTO:
        return profile.auto if profile else EntrypointMode.BYPASS
    return mode


def requested(spec: Spec, default_port: int, fraction: float | None = None) -> dict[str, Requested]:
    """What the spec asks for; `fraction`: the memory fraction the engine derives where the spec gives none."""
    engine, model = spec.engine, spec.model
    utilization = Requested(_text(engine.gpu_memory_utilization), engine.source("gpu_memory_utilization"))
    if engine.gpu_memory_utilization is None and fraction is not None:
        utilization = Requested(_text(fraction), Source.DERIVED)
    return {
        "model_path": Requested(model.mount, Source.SPEC),
        "host": Requested(engine.host, engine.source("host")),
        "port": Requested(str(engine.port or default_port), engine.source("port")),
        "max_model_len": Requested(_text(engine.max_model_len), engine.source("max_model_len")),
        "gpu_memory_utilization": utilization,
    }


def resolve_entrypoint(
    spec: Spec, profile: Profile | None, default_port: int, fraction: float | None = None
) -> Entrypoint:
    mode = decide_mode(spec, profile)
    wanted = requested(spec, default_port, fraction)
    spec_env = {**spec.container.env, **spec.engine.env}
    effective: list[Effective] = []
    adapt_env: list[Setting] = []
    for setting in SETTINGS:
        want = wanted[setting]
        control = profile.control(setting) if profile and profile.args is ArgsStyle.ENV_DRIVEN else None
        if control is None or mode is EntrypointMode.BYPASS:
            effective.append(Effective(setting, want.value, want.value, want.source))
        elif mode is EntrypointMode.ADAPT:
            value = want.value or control.default
            source = want.source if want.value else Source.PROFILE
            adapt_env.append(
                Setting(control.env, value, source, f"entrypoint: adapt; the image's entrypoint reads it for {setting}")
            )
            reason = "" if want.value else f"the entrypoint's default {control.env}={value}"
            effective.append(Effective(setting, want.value, value, source, reason))
        elif control.env in spec_env:  # keep: the entrypoint decides from the environment it sees
            value = spec_env[control.env]
            reason = f"{control.env} is set in the spec's env" if value != want.value else ""
            effective.append(Effective(setting, want.value, value, Source.SPEC, reason))
        else:
            reason = (
                f"entrypoint: keep; the image's entrypoint reads {control.env} (default {control.default}) "
                "and ignores the command line for it"
            )
            value = control.default
            effective.append(
                Effective(setting, want.value, value, Source.PROFILE, reason if value != want.value else "")
            )
    effective.append(_served_name(spec, effective[0]))
    return Entrypoint(mode, tuple(effective), tuple(adapt_env))


# A Hugging Face cache snapshot: .../models--ORG--NAME/snapshots/REVISION
_HF_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$")


def default_served_name(model_path: str) -> tuple[str, str]:
    """(name, why): what a client would type for weights at `model_path`, with where it came from.

    The folder's name (`Qwen3-32B`), or `Org/Name` for a Hugging Face cache snapshot, whose folder
    name is a revision hash; never the whole path, which no client would guess.
    """
    snapshot = _HF_SNAPSHOT.search(model_path)
    if snapshot:
        return f"{snapshot.group(1)}/{snapshot.group(2)}", "the Hugging Face repository of model.path's snapshot"
    name = PurePosixPath(model_path).name
    return (name, "model.path's folder name") if name else (model_path, "model.path")


def _served_name(spec: Spec, model_path: Effective) -> Effective:
    """The name clients ask for; an entrypoint that ignores the command line names it after its own path."""
    model = spec.model
    asked, why = (model.name, "") if model.name is not None else default_served_name(model.path)
    if model.name is not None or model_path.effective == model.mount:
        return Effective("served_model_name", asked, asked, Source.SPEC if model.name else Source.DERIVED, why)
    return Effective(
        "served_model_name", asked, model_path.effective, model_path.source, "vLLM names the model after its path"
    )


def setting_path(setting: str, spec: Spec) -> Path:
    """Where in the spec a setting is asked for: where a warning about it points."""
    if setting == "model_path":
        return ("model", "mount") if spec.model.is_given("mount") else ("model", "path")
    if setting == "served_model_name":
        return ("model", "name")
    return ("engine", setting)


def known_images(own: tuple[Profile, ...] = ()) -> str:
    return ", ".join(sorted({m for p in (*own, *load_profiles()) for m in p.match}))


def _text(value: int | float | str | None) -> str:
    return "" if value is None else str(value)
