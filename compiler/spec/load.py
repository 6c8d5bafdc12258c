"""Load a spec file: YAML with positions kept, every syntax problem and duplicate key reported.

A spec is a few KiB written by a person, so the loader refuses what no spec needs and what would
make it hang or crash: files over MAX_SPEC_BYTES, nesting deeper than MAX_DEPTH, aliases that
expand to more than MAX_ALIAS_EXPANSION values, characters YAML forbids, lone surrogate escapes.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, StreamMark
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from compiler.diagnostics import Diagnostic, Path, Severity
from compiler.spec.yaml_errors import plain_message
from compiler.user_files import MAX_DEPTH, MAX_DIGITS, TooLarge, UnreadableFile, read_bytes

MAX_SPEC_BYTES = 1024 * 1024
MAX_ALIAS_EXPANSION = 10_000  # values that aliases (*name) may add to the document, all together
MAX_NUMBER_LENGTH = MAX_DIGITS  # Python refuses to read integers of over 4300 digits

# What YAML 1.2 allows in a stream (tab, newline, printable Unicode); anything else is refused by position.
_FORBIDDEN = re.compile(r"[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Explicit tags that change nothing; any other (!!int, !!binary, !custom, even !!str, which ruamel keeps
# wrapped) is refused: a spec needs none.
_CORE_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = {"!", _CORE_TAG + "map", _CORE_TAG + "seq"}
_NUMBER_TAGS = {_CORE_TAG + "int", _CORE_TAG + "float"}


@dataclass(frozen=True)
class Document:
    """The spec as loaded: `data` keeps ruamel's position info for `locate`."""

    filename: str
    text: str
    data: Any


class SpecReadError(Exception):
    """The spec file cannot be read as a spec at all (missing, unreadable, too large, not UTF-8)."""


def read_spec(path: FilePath) -> str:
    """The text of a spec file; reads at most MAX_SPEC_BYTES + 1 bytes, so /dev/zero or a huge file ends fast."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # the generated files and the manifest record the name, as UTF-8 text
        shown = str(os.fsencode(path))[2:-1]
        raise SpecReadError(f"{shown}: the file name is not UTF-8 (shown escaped); rename the file") from None
    try:
        raw = read_bytes(path, MAX_SPEC_BYTES)  # a regular file only: a FIFO or a device is refused at once
    except TooLarge:
        raise SpecReadError(f"{path}: {_too_large()}") from None
    except UnreadableFile as exc:
        raise SpecReadError(str(exc)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw.count(b"\n", 0, exc.start) + 1
        column = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise SpecReadError(
            f"{path}:{line}:{column}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the spec as UTF-8"
        ) from None


def _too_large() -> str:
    return f"larger than {MAX_SPEC_BYTES // 1024 // 1024} MiB; a spec is a few KiB: is this the right file?"


class _LimitError(Exception):
    """A limit of the loader, at a position in the text."""

    def __init__(self, message: str, mark: StreamMark) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class _LimitedComposer(Composer):
    """ruamel's composer with the limits above, checked while the tree is built (before anything walks it).

    An alias is counted as the whole subtree it stands for: that is what every later walk sees.
    """

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.expanded = 0
        self.sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height), for finished nodes

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if not isinstance(event, AliasEvent) and self.depth >= MAX_DEPTH:
            raise _LimitError(
                f"nested deeper than {MAX_DEPTH} levels; a spec needs about 6: is this the right file?",
                event.start_mark,
            )
        tag = str(event.ctag) if getattr(event, "ctag", None) is not None else None
        if tag is not None and tag not in _PLAIN_TAGS:
            shown = tag.replace(_CORE_TAG, "!!")
            raise _LimitError(
                f"tag {shown} is not supported in a spec; write the plain value (in quotes for text)", event.start_mark
            )
        if isinstance(event, AliasEvent) and event.anchor in self.anchors:
            node = self.anchors[event.anchor]
            if node.end_mark is None:  # still being composed: the alias is inside what it names
                raise _LimitError(
                    f"alias *{event.anchor} is inside the value it names (&{event.anchor}); "
                    "a spec cannot contain itself",
                    event.start_mark,
                )
            values, height = self._size(node)
            self.expanded += values
            if self.expanded > MAX_ALIAS_EXPANSION:
                raise _LimitError(
                    f"aliases (*name) expand to more than {MAX_ALIAS_EXPANSION} values; "
                    "a spec needs a few: write the values out instead",
                    event.start_mark,
                )
            if self.depth + height > MAX_DEPTH:
                raise _LimitError(
                    f"alias *{event.anchor} nests the spec deeper than {MAX_DEPTH} levels", event.start_mark
                )
        return super().compose_node(parent, index)

    def compose_scalar_node(self, anchor: Any) -> Any:
        node = super().compose_scalar_node(anchor)
        surrogate = _SURROGATE.search(node.value)
        if surrogate:
            raise _LimitError(_surrogate_message(node.value, surrogate.start()), node.start_mark)
        if str(node.tag) in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_LENGTH:
            raise _LimitError(
                f"a number of more than {MAX_NUMBER_LENGTH} characters; no spec value needs one (in quotes for text)",
                node.start_mark,
            )
        return node

    def _size(self, node: Node) -> tuple[int, int]:
        """(values, height) of a finished node, aliases included; memoised so shared subtrees count once."""
        known = self.sizes.get(id(node))
        if known is not None:
            return known
        children: list[Node] = []
        if isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, SequenceNode):
            children = list(node.value)
        sizes = [self._size(child) for child in children]
        result = (1 + sum(v for v, _ in sizes), 1 + max((h for _, h in sizes), default=0))
        self.sizes[id(node)] = result
        return result


class _Constructor(RoundTripConstructor):
    """ruamel's round-trip constructor; a value it cannot convert (a date like 2024-13-45) is an error at its node."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as exc:
            shown = f" {node.value}" if isinstance(node, ScalarNode) else ""
            raise _LimitError(f"cannot read{shown} ({exc}); in quotes it is text", node.start_mark) from None


def _surrogate_message(value: str, at: int) -> str:
    high, low = value[at], value[at + 1 : at + 2]
    escape = f"\\u{ord(high):04x}"
    if "\ud800" <= high <= "\udbff" and low and "\udc00" <= low <= "\udfff":
        pair = (ord(high) - 0xD800) * 0x400 + (ord(low) - 0xDC00) + 0x10000
        return (
            f'"{escape}\\u{ord(low):04x}" is a UTF-16 surrogate pair, which YAML does not combine; '
            f"write \\U{pair:08x} or the character itself"
        )
    return f'"{escape}" is half of a UTF-16 surrogate pair, not a character; write the character itself'


def _yaml() -> YAML:
    # A fresh round-trip loader per call: no global state, positions kept on every mapping and list.
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = True  # duplicates are found and reported by `_duplicates`, all of them
    yaml.Composer = _LimitedComposer
    yaml.Constructor = _Constructor
    return yaml


def load_text(text: str, filename: str) -> tuple[Document, list[Diagnostic]]:
    if len(text) > MAX_SPEC_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        return Document(filename, text, None), [Diagnostic((), _too_large(), Severity.ERROR, 1, 1, True)]
    forbidden = _forbidden_characters(text)
    if forbidden:
        return Document(filename, text, None), forbidden
    yaml = _yaml()
    try:
        # ruamel's warnings (a reused anchor, YAML 1.1 float spelling) would reach stderr as Python warnings.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            root = yaml.compose(text)
            # Built from the tree just composed: one parse, and the limits above hold for the data too.
            data = yaml.constructor.construct_document(root) if root is not None else None
    except _LimitError as exc:
        return Document(filename, text, None), [
            Diagnostic((), exc.message, Severity.ERROR, exc.mark.line + 1, exc.mark.column + 1, True)
        ]
    except MarkedYAMLError as exc:
        message, line, col = plain_message(exc, text)
        return Document(filename, text, None), [Diagnostic((), message, Severity.ERROR, line, col, True)]
    diagnostics = list(_duplicates(root, ()))
    if not isinstance(data, CommentedMap):
        found = "an empty file" if data is None else kind_of(data)
        message = f"the spec must be a mapping (key: value) at the top, found {found}"
        diagnostics.append(Diagnostic((), message, Severity.ERROR, 1, 1, True))
    return Document(filename, text, data), diagnostics


def _forbidden_characters(text: str) -> list[Diagnostic]:
    """YAML forbids control characters other than tab and newlines (NUL, ESC, ...): the first by position."""
    found = [m.start() for m in _FORBIDDEN.finditer(text)]
    if not found:
        return []
    at = found[0]
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    message = f"character U+{ord(text[at]):04X} is not allowed in YAML{more}; remove it (is this a text file?)"
    return [Diagnostic((), message, Severity.ERROR, line, column, True)]


def _duplicates(node: Node | None, path: Path) -> Iterator[Diagnostic]:
    if isinstance(node, MappingNode):
        seen: dict[Any, Node] = {}
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            odd = _odd_key(key_node)
            if odd:
                mark = key_node.start_mark
                yield Diagnostic(path, odd, Severity.ERROR, mark.line + 1, mark.column + 1, True)
            elif isinstance(key, str) and key in seen:
                first = seen[key].start_mark
                mark = key_node.start_mark
                yield Diagnostic(
                    (*path, key),
                    f"duplicate key '{key}' (first defined at line {first.line + 1})",
                    Severity.ERROR,
                    mark.line + 1,
                    mark.column + 1,
                    True,
                )
            elif isinstance(key, str):
                seen[key] = key_node
            yield from _duplicates(value_node, (*path, str(key)))
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicates(item, (*path, index))


def _odd_key(key_node: Node) -> str | None:
    """What is wrong with a key that is not text or a number (a list, a mapping, null, true/false)."""
    if isinstance(key_node, SequenceNode):
        return "a key must be plain text, found a list"
    if isinstance(key_node, MappingNode):
        return "a key must be plain text, found a mapping"
    tag = str(key_node.tag)
    if tag == _CORE_TAG + "null":
        return "a key must be plain text, found nothing (null)"
    if tag == _CORE_TAG + "bool":
        return f"key {key_node.value} is read as true/false; in quotes ('{key_node.value}') it is text"
    return None


def kind_of(value: Any) -> str:
    """What a loaded value is, in the words of a person writing YAML."""
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "nothing (null)"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "a value YAML reads as a date" if hasattr(value, "isoformat") else "an unusual value"


def locate(data: Any, path: Path, at_key: bool = False) -> tuple[int, int]:
    """1-based line and column of `path` in a loaded document; the nearest known parent if absent."""
    node = data
    line, col = (node.lc.line + 1, node.lc.col + 1) if hasattr(node, "lc") else (1, 1)
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, CommentedMap) and part in node:
            # A key merged in (`<<: *base`) or of an `!!omap` has no position of its own here.
            key_at, value_at = _position(node.lc.key, part), _position(node.lc.value, part)
            if key_at is None or value_at is None:
                break
            line, col = key_at if (at_key or not last) else value_at
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            item_at = _position(node.lc.item, part)
            if item_at is None:
                break
            line, col = item_at
            node = node[part]
        else:
            break
    return line, col


def _position(lookup: Any, part: str | int) -> tuple[int, int] | None:
    try:
        found = lookup(part)
    except (KeyError, IndexError, TypeError):
        return None
    return (found[0] + 1, found[1] + 1) if isinstance(found, (tuple, list)) and len(found) >= 2 else None


def to_plain(value: Any) -> Any:
    """ruamel's types to plain dicts, lists, str, int, float, bool: what the later stages work on."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value
