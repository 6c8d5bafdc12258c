"""Rules about engine.max_model_len: the engines refuse one longer than the model's config allows (unless told
to allow it), and a length beyond any model's context is a typo. They only report."""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.resolve.context import Deployment

# Longer than nearly every model's context (1M tokens); past it a value is more likely a typo than a choice.
LONGEST_USUAL = 1 << 20


def max_model_len(d: Deployment) -> Iterator[Diagnostic]:
    engine = d.spec.engine
    length = engine.max_model_len
    if length is None:
        return
    path, bound, config = engine.at("max_model_len"), d.facts.max_positions, d.facts.config
    if isinstance(length, str):
        if d.engine.context_fits_memory != length:
            yield error(
                path,
                f"{length!r}: {d.engine.name} takes its context length only as a number of tokens; write one, or "
                "remove max_model_len for the engine's default",
            )
        return
    if bound is not None and length > bound:
        allow = d.engine.allow_longer_variable  # the variable that makes the engine take it
        longer = (
            f"{length} is longer than {config} allows ({bound} positions, max_position_embeddings and its RoPE scaling)"
        )
        if allow is None:  # no refusal known: the model was not trained on longer sequences
            yield warning(path, f"{longer}: outputs past {bound} tokens may be wrong; write at most {bound}")
        elif _allowed(d, allow):
            yield warning(
                path, f"{longer}; {allow} makes {d.engine.name} take it anyway, and outputs past {bound} may be wrong"
            )
        else:
            yield error(
                path, f"{longer}: {d.engine.name} refuses it at start unless {allow}=1 is set; write at most {bound}"
            )
    elif bound is None and length > LONGEST_USUAL:
        yield warning(
            path,
            f"{length} tokens is longer than nearly every model's context ({LONGEST_USUAL}): the engine refuses "
            "a max_model_len above the model's max_position_embeddings (config.json), and one sequence of that "
            "length must fit its KV cache at start; check the model's card",
        )


def _allowed(d: Deployment, name: str) -> bool:
    """The variable is set to a true value for every container (the spec's env, or a node's own)."""
    spec = d.spec
    values = [spec.container.env.get(name), spec.engine.env.get(name)]
    shared = next((v for v in reversed(values) if v is not None), None)
    return all((node.env.get(name, shared) or "").strip().lower() in ("1", "true") for node in spec.cluster.nodes)


RULES = (max_model_len,)
