"""The one way sparkc reads what it did not write (a recipe, a mod, a profile, a bench summary, a node's
answer): a regular file only, at most a given number of bytes; JSON no deeper than MAX_DEPTH levels and
with no integer over MAX_DIGITS digits; numbers in text read as ASCII digits only. And the one way it
writes a file into a folder it does not own: anew, never through a link planted there (replace_file).

A FIFO must not hang a compile and /dev/zero must not fill the memory: the file is opened with
O_NONBLOCK (opening a FIFO for reading waits for a writer otherwise), checked with fstat to be a
regular file, and read up to its limit plus one byte, so that a larger file is told apart without
reading it whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


class UnreadableFile(Exception):
    """Why a file cannot be read; the message names the path and says what to do."""


class TooLarge(UnreadableFile):
    """The file is larger than the limit it was read with."""


class BadJson(UnreadableFile):
    """The text is not JSON, or JSON nested deeper or with larger integers than any input sparkc reads."""


# Bounds for every structured input: a spec, a recipe or a summary needs a handful of levels and numbers
# of a few digits; Python itself refuses integers of over 4300 digits (a ValueError) and recurses per level.
MAX_DEPTH = 64
MAX_DIGITS = 100


def read_bytes(path: Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file `path`; UnreadableFile if it is missing, not a regular file, not
    readable or over `limit` bytes. With `follow_symlinks=False` a symbolic link is refused too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such file") from None
    except OSError as exc:
        if not follow_symlinks and path.is_symlink():
            raise UnreadableFile(f"{path}: a symbolic link, not a plain file; put the file itself there") from None
        raise UnreadableFile(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte in the name
        raise UnreadableFile(f"{path!r}: not a usable file name") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableFile(f"{path}: {_kind(mode)}, not a plain file; name a regular file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise TooLarge(f"{path}: larger than {_size(limit)}; is this the right file?")
    return data


def read_text(path: Path, limit: int, *, follow_symlinks: bool = True) -> str:
    """As read_bytes, decoded as UTF-8 (UnreadableFile if it is not)."""
    data = read_bytes(path, limit, follow_symlinks=follow_symlinks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UnreadableFile(f"{path}:{line}: not UTF-8 text (at byte {exc.start}); save it as UTF-8") from None


def read_json(path: Path, limit: int, *, follow_symlinks: bool = True) -> Any:
    """As read_text, parsed as JSON by loads_json."""
    return loads_json(read_text(path, limit, follow_symlinks=follow_symlinks), str(path))


def loads_json(text: str, source: str) -> Any:
    """JSON text from `source` (a file's name, or what the text is), or BadJson naming `source`, the line and
    column, and what is wrong: not JSON, deeper than MAX_DEPTH levels, an integer of over MAX_DIGITS digits."""

    def whole(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_DIGITS:
            raise _HugeNumber(len(digits.lstrip("-")))
        return int(digits)

    try:
        data = json.loads(text, parse_int=whole)
    except json.JSONDecodeError as exc:
        raise BadJson(f"{source}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    except _HugeNumber as exc:
        raise BadJson(f"{source}: a number of {exc.args[0]} digits; no input of sparkc has one") from None
    except RecursionError:  # the parser's own limit (about 1000 levels), far below what a C stack holds
        raise BadJson(f"{source}: {_TOO_DEEP}") from None
    if not _shallow(data):
        raise BadJson(f"{source}: {_TOO_DEEP}")
    return data


_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels; is this the right file?"


class _HugeNumber(ValueError):
    pass


def _shallow(data: Any) -> bool:
    """Whether `data` nests at most MAX_DEPTH lists and objects deep (walked without recursion)."""
    level = [data]
    for _ in range(MAX_DEPTH):
        level = [v for item in level if isinstance(item, (dict, list)) for v in _children(item)]
        if not level:
            return True
    return False


def _children(item: dict[Any, Any] | list[Any]) -> list[Any]:
    return [v for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (dict, list))]


def ascii_int(text: str, max_digits: int = 18) -> int | None:
    """`text` as a whole number when it is 1 to `max_digits` ASCII digits, else None. str.isdigit() and int()
    take other scripts' digits (`²` is a digit that int() refuses, `٣` one it reads): a node's or a file's
    number is read by this instead."""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(limit: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size:
            return f"{limit / size:g} {unit}"
    return f"{limit} bytes"


class InTheWay(Exception):
    """A link (or a folder, a pipe...) stands where sparkc writes a file; the message names it."""


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write `path` whole and anew: a temporary file that mkstemp creates beside it (exclusively: never
    opened through a planted link) gets `data` and `mode`, then is renamed over `path` (a rename replaces
    a name, it follows no link). InTheWay where `path` is a link or anything but a plain file; OSError
    where the folder cannot be written."""
    try:
        found = path.lstat().st_mode
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found):
        what = "a symbolic link" if stat.S_ISLNK(found) else _kind(found)
        raise InTheWay(f"{path} is {what}, where sparkc writes a file of its own; remove it and run again")
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temporary = Path(name)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
