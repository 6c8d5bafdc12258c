"""Jinja's compiled templates kept between runs: compiling the templates is most of a first render.

Jinja keys an entry on the template's name and file and checks the sha1 of its source; this adds what Jinja
leaves out (the environment's syntax settings and its filters and tests, which the compiled code depends
on), a sha256 over each entry so that a truncated or garbled file is never unpickled, and silence: any
problem reading or writing reads as a miss, and the template is compiled from source as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import jinja2
from jinja2.bccache import Bucket

from compiler.cache import cache_home, write_quietly

_FORMAT = b"sparkc-jinja-cache-1\n"


class TemplateCache(jinja2.BytecodeCache):
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def for_environment(cls, env: jinja2.Environment) -> TemplateCache | None:
        home = cache_home()
        return cls(home / "templates" / fingerprint(env)) if home else None

    def _path(self, bucket: Bucket) -> Path:
        return self.folder / f"{bucket.key}.bin"

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            data = self._path(bucket).read_bytes()
        except (OSError, ValueError):
            return
        head, digest, payload = data[: len(_FORMAT)], data[len(_FORMAT) : len(_FORMAT) + 32], data[len(_FORMAT) + 32 :]
        if head != _FORMAT or hashlib.sha256(payload).digest() != digest:
            return
        try:
            bucket.bytecode_from_string(payload)  # Jinja itself drops an entry for other source or Python
        except Exception:  # whatever a bad entry raises, the template is compiled afresh
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            payload = bucket.bytecode_to_string()
        except Exception:  # not storing is always safe
            return
        write_quietly(self._path(bucket), _FORMAT + hashlib.sha256(payload).digest() + payload)


def fingerprint(env: jinja2.Environment) -> str:
    """What, besides a template's source, the compiled code depends on."""

    def described(functions: Mapping[str, object]) -> list[tuple[str, str, str]]:
        return sorted(
            (
                name,
                getattr(f, "__module__", "") + "." + getattr(f, "__qualname__", type(f).__qualname__),
                str(getattr(f, "jinja_pass_arg", "")),
            )
            for name, f in functions.items()
        )

    settings = (
        jinja2.__version__,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        sorted(env.extensions),
        env.optimized,
        env.is_async,
        env.autoescape if isinstance(env.autoescape, bool) else "callable",
        env.finalize is not None,
        env.undefined.__qualname__,
        described(env.filters),
        described(env.tests),
    )
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:32]
