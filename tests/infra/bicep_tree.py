"""Busbar's Bicep templates read through pycep-parser, the Bicep parser checkov uses (the Bicep compiler is
not available here).

pycep turns a template into a tree of plain values: an identifier (a parameter, variable, resource or
module symbol) is a ``pycep.models.BicepElement``, a quoted literal a plain ``str`` (an interpolated one
keeps its ``${...}`` text), and expressions are ``{"operator": ...}`` / ``{"function": ...}`` dicts. A
template pycep cannot parse raises ``TemplateParseError`` naming the file, so the tests built on this module
fail instead of reading around it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pycep import BicepParser
from pycep.models import BicepElement

_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")
_IDENTIFIER = re.compile(r"(?<![\w.'])([A-Za-z_]\w*)\b(?!\s*\()")
_QUOTED = re.compile(r"'[^']*'")

Tree = dict[str, Any]


class TemplateParseError(AssertionError):
    """pycep could not parse a template, or it lacks what a test reads from it."""


def parse_template(path: Path) -> Tree:
    """The syntax tree of one ``.bicep`` file."""
    try:
        parsed = BicepParser().parse(file_path=path)
    except Exception as error:  # lark's UnexpectedInput and pycep's ValueError alike
        raise TemplateParseError(f"{path.name}: pycep cannot parse it: {error}") from error
    # pycep types the tree as TypedDicts per section; the tests walk it as plain nested dicts.
    return dict(parsed)


def read_templates(infra: Path) -> dict[str, Tree]:
    """Every ``.bicep`` file under ``infra`` (relative path -> syntax tree)."""
    return {p.relative_to(infra).as_posix(): parse_template(p) for p in sorted(infra.rglob("*.bicep"))}


def is_reference(value: object) -> bool:
    """``value`` is a bare identifier (a parameter, variable or symbol), not a literal or an expression."""
    return isinstance(value, BicepElement)


def is_literal_string(value: object) -> bool:
    """``value`` is a quoted string without interpolation."""
    return isinstance(value, str) and not is_reference(value) and "${" not in value


def accessor_path(value: object) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a chain of property accesses."""
    if is_reference(value):
        return [str(value)]
    if isinstance(value, Mapping) and value.get("operator", {}).get("type") == "property_accessor":
        operands = value["operator"]["operands"]
        head, tail = accessor_path(operands["operand_1"]), accessor_path(operands["operand_2"])
        if head is None or tail is None:
            return None
        return head + tail
    if isinstance(value, str):  # pycep leaves the second operand of an accessor a plain string
        return [value]
    return None


def referenced_names(value: object) -> set[str]:
    """Every identifier ``value`` mentions: bare references, accessor heads, and names in ``${...}``."""
    found: set[str] = set()
    if is_reference(value):
        found.add(str(value))
    elif isinstance(value, str):
        for expression in _INTERPOLATION.findall(value):
            found.update(_IDENTIFIER.findall(_QUOTED.sub("''", expression)))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key == "array_name" and isinstance(item, str):  # `for x in <array_name>`
                found.add(item)
            else:
                found |= referenced_names(item)
    elif isinstance(value, list):
        for item in value:
            found |= referenced_names(item)
    return found


def lookup(value: object, *path: str) -> Any:
    """``value[path[0]][path[1]]...``, failing with the missing key's path."""
    for depth, key in enumerate(path):
        if not isinstance(value, Mapping) or key not in value:
            raise TemplateParseError(f"no {'.'.join(path[: depth + 1])!r}")
        value = value[key]
    return value


@dataclass(frozen=True)
class BicepResource:
    """One ``resource`` declaration; ``config`` is its body (the per-item body of a ``for`` resource)."""

    file: str
    symbol: str
    type: str
    api_version: str
    existing: bool
    config: Mapping[str, Any]
    loop: Mapping[str, Any] | None
    condition: object

    def at(self, *path: str) -> Any:
        """A value of the body by key path, e.g. ``resource.at("properties", "scope")``."""
        try:
            return lookup(self.config, *path)
        except TemplateParseError as error:
            raise TemplateParseError(f"{self.file}: resource {self.symbol}: {error}") from None


def _resource(file: str, symbol: str, declaration: Mapping[str, Any]) -> BicepResource:
    body = declaration["config"]
    loop, condition = None, None
    if "loop_type" in body or "condition" in body:  # `[for ...]` or `if (...)`: the body is one level down
        loop, condition, body = body.get("loop_type"), body.get("condition"), body["config"]
    return BicepResource(
        file=file,
        symbol=symbol,
        type=declaration["type"],
        api_version=declaration["api_version"],
        existing=bool(declaration["existing"]),
        config=body,
        loop=loop,
        condition=condition,
    )


def resources(templates: Mapping[str, Tree]) -> list[BicepResource]:
    """Every resource declaration of every file."""
    return [
        _resource(file, symbol, declaration)
        for file, tree in templates.items()
        for symbol, declaration in tree.get("resources", {}).items()
    ]


def parameters(tree: Tree) -> dict[str, bool]:
    """Parameter name -> has a default."""
    return {name: param.get("default") is not None for name, param in tree.get("parameters", {}).items()}


def string_variables(tree: Tree) -> dict[str, str]:
    """``var name = '...'`` declarations holding a literal string."""
    return {
        name: var["value"]
        for name, var in tree.get("variables", {}).items()
        if is_literal_string(var.get("value"))
    }


@dataclass(frozen=True)
class ModuleCall:
    """One ``module`` declaration of a template."""

    symbol: str
    path: str  # relative to the calling template's folder
    params: Mapping[str, Any]


def modules(tree: Tree) -> dict[str, ModuleCall]:
    """The template's module calls by symbol."""
    return {
        symbol: ModuleCall(symbol, module["detail"]["path"], module["config"].get("params", {}))
        for symbol, module in tree.get("modules", {}).items()
    }


def declarations(tree: Tree) -> Iterator[tuple[str, object]]:
    """(what, value) of every part of a template that can use a parameter or variable."""
    for kind in ("variables", "outputs", "resources", "modules"):
        for name, declaration in tree.get(kind, {}).items():
            yield f"{kind}.{name}", declaration


@dataclass(frozen=True)
class AppSettingEntry:
    """One ``{ name: '...' value: ... }`` entry of the Function App's ``appSettings`` array."""

    file: str
    name: str
    value: object  # pycep's value: a literal str, a BicepElement reference, or an expression dict


def app_settings(templates: Mapping[str, Tree]) -> list[AppSettingEntry]:
    """The entries of the one ``siteConfig.appSettings`` array (exactly one site must declare it)."""
    sites = [
        r
        for r in resources(templates)
        if r.type == "Microsoft.Web/sites"
        and "appSettings" in r.config.get("properties", {}).get("siteConfig", {})
    ]
    if len(sites) != 1:
        raise TemplateParseError(f"expected one site with appSettings, found {[s.symbol for s in sites]}")
    site = sites[0]
    entries = []
    for entry in site.at("properties", "siteConfig", "appSettings"):
        if (
            not isinstance(entry, Mapping)
            or set(entry) != {"name", "value"}
            or not is_literal_string(entry["name"])
        ):
            raise TemplateParseError(
                f"{site.file}: app setting not of the form {{ name: '...' value: ... }}: {entry}"
            )
        entries.append(AppSettingEntry(site.file, entry["name"], entry["value"]))
    return entries
