"""HTTP route templates as the host matches them (ASP.NET routing subset).

``endpoints/{endpoint}/subscriptions/{eventType}``: literal segments match case-insensitively;
``{name}`` matches one segment, ``{name?}`` an optional last segment, ``{*name}`` the rest of the path, and
``{name:int}`` / ``:alpha`` / ``:guid`` / ``:bool`` constrain a segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

_PARAMETER = re.compile(
    r"^\{(?P<star>\*)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<kind>[a-z]+))?(?P<opt>\?)?\}$"
)
_CONSTRAINTS = {
    None: r"[^/]+",
    "int": r"-?\d+",
    "long": r"-?\d+",
    "alpha": r"[A-Za-z]+",
    "bool": r"(?i:true|false)",
    "guid": r"[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12}",
}


class RouteError(ValueError):
    """A route template devhost cannot read."""


@dataclass(frozen=True, slots=True)
class RouteTemplate:
    """A compiled template; :meth:`match` returns the route parameters or None."""

    template: str
    pattern: re.Pattern[str]
    literal_segments: int

    def match(self, path: str) -> dict[str, str] | None:
        """The route parameters when ``path`` (decoded by :func:`decode_request_path`, without prefix)
        matches."""
        found = self.pattern.fullmatch(path.strip("/"))
        if found is None:
            return None
        return {k: v for k, v in found.groupdict().items() if v is not None}


_ENCODED_SLASH = re.compile(r"(%2[Ff])")


def decode_request_path(raw_path: str) -> str:
    """The request path as ASP.NET Core routes it: percent-decoded except ``%2F``, which stays encoded
    (so a route value may hold an encoded ``/`` without splitting into segments)."""
    path = raw_path.split("?", 1)[0]
    return "".join(
        part if _ENCODED_SLASH.fullmatch(part) else unquote(part) for part in _ENCODED_SLASH.split(path)
    )


def route_conflict(template: str, methods: frozenset[str], other: str, other_methods: frozenset[str]) -> bool:
    """Whether two HTTP functions claim the same route (same template, ignoring case, sharing a method),
    which the host refuses at start-up."""
    return template.strip("/").lower() == other.strip("/").lower() and bool(methods & other_methods)


def compile_route(template: str) -> RouteTemplate:
    """Compile ``template``; raises RouteError for an unsupported constraint or misplaced parameter."""
    segments = [s for s in template.strip("/").split("/") if s]
    regex = ""
    literals = 0
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        separator = "/" if index else ""
        parameter = _PARAMETER.match(segment)
        if parameter is None:
            if "{" in segment or "}" in segment:
                raise RouteError(f"route '{template}': segment '{segment}' mixes text and parameters")
            regex += separator + "(?i:" + re.escape(segment) + ")"
            literals += 1
            continue
        name, kind = parameter["name"], parameter["kind"]
        if kind not in _CONSTRAINTS:
            raise RouteError(f"route '{template}': unsupported constraint ':{kind}'")
        if parameter["star"] or parameter["opt"]:
            if not last:
                raise RouteError(f"route '{template}': '{segment}' must be the last segment")
            body = ".*" if parameter["star"] else _CONSTRAINTS[kind]
            regex += f"(?:{separator}(?P<{name}>{body}))?"
        else:
            regex += f"{separator}(?P<{name}>{_CONSTRAINTS[kind]})"
    return RouteTemplate(template, re.compile(regex), literals)
