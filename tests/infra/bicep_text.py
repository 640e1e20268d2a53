"""A small reader for Busbar's Bicep templates (the Bicep compiler is not available here).

It understands the regular shapes infra/ sticks to: ``var x = '...'`` string variables, ``resource sym
'Type@version' [existing] = { ... }`` blocks whose simple properties are one ``key: value`` per line, and
one ``appSettings: [ { name: '...' value: ... } ... ]`` array. Anything it cannot read is reported, not
guessed, so the tests that use it fail loudly when the templates drift from these shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_RESOURCE = re.compile(
    r"^resource\s+(\w+)\s+'([^'@]+)@([^']+)'\s+(existing\s+)?=\s*(?:if\s*\(.*\)\s*)?\{", re.M
)
_VAR_STRING = re.compile(r"^var\s+(\w+)\s*=\s*'([^']*)'", re.M)
_PROPERTY = re.compile(r"^\s*'?([\w.]+)'?\s*:\s*(.+?)\s*$")


class BicepShapeError(AssertionError):
    """The template text is not in a shape this reader understands."""


def _string_end(text: str, quote_index: int) -> int:
    """Index of the quote closing the Bicep string opened at ``quote_index`` (``\\'`` escapes skipped)."""
    i = quote_index + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "'":
            return i
        i += 1
    raise BicepShapeError(f"unterminated string at offset {quote_index}")


def _block(text: str, open_index: int) -> str:
    """The text between the bracket at ``open_index`` and its partner (strings and comments skipped)."""
    pairs = {"{": "}", "[": "]"}
    opener = text[open_index]
    closer = pairs[opener]
    depth = 0
    i = open_index
    while i < len(text):
        ch = text[i]
        if ch == "'":
            i = _string_end(text, i)
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return text[open_index + 1 : i]
        i += 1
    raise BicepShapeError(f"unbalanced {opener!r} at offset {open_index}")


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``//`` comment (a ``//`` inside a string is kept)."""
    in_string = False
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and in_string:
            escaped = True
        elif ch == "'":
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
    return line


def _top_level_lines(body: str) -> list[str]:
    """Lines of ``body`` that are at its own nesting level (nested blocks left out)."""
    lines: list[str] = []
    depth = 0
    for raw in body.splitlines():
        line = _strip_comment(raw).rstrip()
        if depth == 0 and line.strip():
            lines.append(line.strip())
        depth += line.count("{") + line.count("[") - line.count("}") - line.count("]")
    return lines


@dataclass(frozen=True)
class BicepResource:
    """One ``resource`` declaration."""

    file: str
    symbol: str
    type: str
    api_version: str
    existing: bool
    body: str
    properties: dict[str, str] = field(default_factory=dict)  # top-level ``key: value`` (raw text)


@dataclass(frozen=True)
class AppSettingEntry:
    """One ``{ name: '...' value: ... }`` entry of the Function App's ``appSettings`` array."""

    file: str
    name: str
    value: str  # raw Bicep expression text


def _properties(body: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in _top_level_lines(body):
        match = _PROPERTY.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def read_templates(infra: Path) -> dict[str, str]:
    """Every ``.bicep`` file under ``infra`` (relative path -> text)."""
    return {
        p.relative_to(infra).as_posix(): p.read_text(encoding="utf-8") for p in sorted(infra.rglob("*.bicep"))
    }


def string_variables(text: str) -> dict[str, str]:
    """``var name = '...'`` declarations of one file."""
    return dict(_VAR_STRING.findall(text))


def resources(templates: dict[str, str]) -> list[BicepResource]:
    """Every resource declaration of every file."""
    found: list[BicepResource] = []
    for file, text in templates.items():
        for match in _RESOURCE.finditer(text):
            body = _block(text, match.end() - 1)
            found.append(
                BicepResource(
                    file=file,
                    symbol=match.group(1),
                    type=match.group(2),
                    api_version=match.group(3),
                    existing=bool(match.group(4)),
                    body=body,
                    properties=_properties(body),
                )
            )
    return found


def nested_block(body: str, key: str) -> str:
    """The body of ``key: {`` or ``key: [`` inside ``body``."""
    match = re.search(rf"(?m)^\s*{re.escape(key)}\s*:\s*([{{\[])", body)
    if match is None:
        raise BicepShapeError(f"no {key!r} block")
    return _block(body, match.start(1))


def app_settings(templates: dict[str, str]) -> list[AppSettingEntry]:
    """The entries of the one ``appSettings`` array (exactly one must exist across the templates)."""
    arrays = [(file, text) for file, text in templates.items() if re.search(r"(?m)^\s*appSettings\s*:", text)]
    if len(arrays) != 1:
        raise BicepShapeError(f"expected one appSettings array, found it in {[f for f, _ in arrays]}")
    file, text = arrays[0]
    if len(re.findall(r"(?m)^\s*appSettings\s*:", text)) != 1:
        raise BicepShapeError(f"{file} has more than one appSettings array")
    array = nested_block(text, "appSettings")
    entries: list[AppSettingEntry] = []
    i = 0
    while (start := array.find("{", i)) >= 0:
        entry = _block(array, start)
        props = _properties(entry)
        name = props.get("name", "")
        if not (name.startswith("'") and name.endswith("'")) or "value" not in props or len(props) != 2:
            raise BicepShapeError(
                f"{file}: app setting entry not of the form {{ name: '...' value: ... }}: {entry!r}"
            )
        entries.append(AppSettingEntry(file, name.strip("'"), props["value"]))
        i = start + len(entry) + 2
    return entries
