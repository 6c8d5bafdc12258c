"""Rules about sizes, the model (revision, Hugging Face cache, draft model) and memory. They only report."""

from __future__ import annotations

from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error, warning
from compiler.resolve.context import Deployment
from compiler.sizes import MAX_BYTES, RULE, size_bytes


def sizes(d: Deployment) -> Iterator[Diagnostic]:
    for path, value in _sizes(d):
        count = size_bytes(value)
        if count is None:  # the schema already refused it
            continue
        if count > MAX_BYTES:
            yield error(path, f"{value!r} is more bytes than docker can hold (at most {MAX_BYTES}); write {RULE}")
        elif count == 0 and path[-1] == "shm_size":
            yield warning(path, "0 makes docker use its default /dev/shm of 64 MB; remove the key, or give a size")


def _sizes(d: Deployment) -> list[tuple[tuple[str | int, ...], int | str]]:
    container = d.spec.container
    found: list[tuple[tuple[str | int, ...], int | str]] = []
    if container.shm_size is not None:
        found.append((container.at("shm_size"), container.shm_size))
    return found


RULES = (sizes,)
