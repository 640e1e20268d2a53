"""JSON with comments: the text layer under the Config.json reader (:mod:`emulator.config`).

Objects keep their key order and repeated keys (:class:`JsonObject`), ``NaN``/``Infinity`` are kept apart so
they can be refused (:class:`JsonConstant`), and every error position points at the text as written.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonConstant",
    "JsonObject",
    "describe",
    "loads",
    "strip_json_comments",
    "too_deep",
]

_JSON_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)')
_NOT_NEWLINE_RE = re.compile(r"[^\r\n]")


def strip_json_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside JSON strings.

    Comments are replaced by spaces (newlines kept), so JSON error positions still point at the original text.
    Raises :class:`ValueError` for an unterminated ``/*`` comment.
    """

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return token
        if token.startswith("/*") and (len(token) < 4 or not token.endswith("*/")):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            raise ValueError(f"unterminated /* comment starting at line {line}, column {column}")
        return _NOT_NEWLINE_RE.sub(" ", token)

    return _JSON_TOKEN_RE.sub(blank, text)


class JsonObject:
    """A JSON object with its key order and duplicate keys preserved."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        self.pairs = pairs


class JsonConstant:
    """NaN / Infinity / -Infinity: accepted by Python's json module, never valid here."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def describe(value: object) -> str:
    """A JSON value as a problem message shows it: its text when short, its kind when not."""
    if isinstance(value, JsonObject):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, JsonConstant):
        return value.text
    if value is None or isinstance(value, bool | str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    return type(value).__name__


def too_deep(text: str) -> str:
    """The message for JSON nested beyond what the parser can follow, with where it gets too deep."""
    depth = 0
    line, column = 1, 0
    in_string = escaped = False
    for char in text:
        column += 1
        if char == "\n":
            line, column = line + 1, 0
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                break
        elif char in "]}":
            depth -= 1
    return (
        f"invalid JSON at line {line}, column {column}: arrays and objects are nested more than "
        f"{MAX_JSON_DEPTH} levels deep (a Config.json needs at most 12)"
    )


# Where the message above points; Python's JSON parser itself gives up at about the recursion limit.
MAX_JSON_DEPTH = 100


def loads(text: str) -> object:
    """Parse JSON text (comments already stripped) into lists, :class:`JsonObject` and plain values.

    Raises :class:`json.JSONDecodeError` for invalid JSON and :class:`RecursionError` for JSON nested too deep
    to follow (see :func:`too_deep`).
    """
    return json.loads(text, object_pairs_hook=JsonObject, parse_constant=JsonConstant)
