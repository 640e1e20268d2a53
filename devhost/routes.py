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
        """The route parameters when ``path`` (without prefix, no leading slash) matches."""
        found = self.pattern.fullmatch(path.strip("/"))
        if found is None:
            return None
        return {k: unquote(v) for k, v in found.groupdict().items() if v is not None}


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
