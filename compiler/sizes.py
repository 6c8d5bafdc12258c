"""Sizes as docker reads them (`--shm-size 16g`): its units parser, RAMInBytes, whose units are powers of 1024.

docker takes a number with an optional decimal part, an optional space, and an optional unit: `b`, or
`k`, `m`, `g`, `t`, `p` alone or followed by `b` or `ib`, in any case (`10.24g`, `96GB`, `64MiB`, `1024`).
The bytes are the number times the unit, cut to a whole number (`10.24g` is 10995116277 bytes). Its
parser also takes forms no one writes on purpose (`1e3`, `0x10`); the schema keeps those out, so every
size in a spec reads the same to a person as to docker. What reaches a script is the whole number of
bytes: the same for every spelling, and what the manifest records.
"""

from __future__ import annotations

import re

# The schema's pattern (schemas/spec.schema.json, $defs/size) spells the same grammar without (?i).
SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?) ?(b|[kmgtp](?:i?b)?)?", re.IGNORECASE)
UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
# docker keeps the size in an int64.
MAX_BYTES = 2**63 - 1
RULE = (
    "a number, optionally with a decimal part, and an optional unit b, k, m, g, t or p (powers of 1024, "
    "as docker counts), which may end in b or ib, in any case: 16g, 10.24gb, 64MiB, 1024"
)


def size_bytes(value: int | str) -> int | None:
    """The bytes a size stands for, as docker computes them; None when docker's syntax does not allow it."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    match = SIZE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    unit = (match.group(2) or "")[:1].lower()
    # Float arithmetic, then truncation toward zero: docker's own steps, so the byte counts agree.
    return int(float(match.group(1)) * UNITS[unit])


def gigabytes(count: int | float) -> str:
    """Bytes in decimal GB, as memory sizes are quoted (one decimal)."""
    return f"{count / 1e9:.1f} GB"
