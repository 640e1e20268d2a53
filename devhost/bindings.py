"""Binding expressions and connections, resolved against the app settings the way the host does.

``%Name%`` in a binding property is replaced by app setting ``Name`` (an unknown name is an error at
start-up, like the host's "Unable to resolve app setting" indexing failure). A ``connection`` names an app
setting holding a connection string, or a prefix whose ``<name>__fullyQualifiedNamespace`` selects
identity-based access (DefaultAzureCredential).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_EXPRESSION = re.compile(r"%([^%]+)%")
DEFAULT_SERVICE_BUS_CONNECTION = "AzureWebJobsServiceBus"


class BindingError(ValueError):
    """A binding refers to an app setting that does not exist or is unusable."""


def resolve_expression(text: str, settings: Mapping[str, str], *, where: str) -> str:
    """``text`` with every ``%Name%`` replaced by the setting's value."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in settings:
            raise BindingError(f"{where}: '%{name}%' does not resolve to a value.")
        return settings[name]

    return _EXPRESSION.sub(replace, text)


@dataclass(frozen=True, slots=True)
class ServiceBusConnection:
    """Either a connection string or a fully qualified namespace for DefaultAzureCredential."""

    connection_string: str | None = None
    fully_qualified_namespace: str | None = None

    def describe(self) -> str:
        """A secret-free description for logs."""
        if self.fully_qualified_namespace:
            return f"{self.fully_qualified_namespace} (DefaultAzureCredential)"
        assert self.connection_string is not None
        endpoint = next(
            (p for p in self.connection_string.split(";") if p.lower().startswith("endpoint=")), "?"
        )
        return endpoint.split("=", 1)[1]


def resolve_connection(name: str | None, settings: Mapping[str, str], *, where: str) -> ServiceBusConnection:
    """The Service Bus connection an app setting name designates, read as the host's Service Bus extension
    does: the setting itself, else ``AzureWebJobs<name>``; a string value is a connection string, a section
    (``<name>__fullyQualifiedNamespace``) selects identity-based access."""
    setting = name or DEFAULT_SERVICE_BUS_CONNECTION
    candidates = (
        [setting] if setting.lower().startswith("azurewebjobs") else [setting, f"AzureWebJobs{setting}"]
    )
    for candidate in candidates:
        prefix = f"{candidate}__".lower()
        section = {k[len(prefix) :]: v for k, v in settings.items() if k.lower().startswith(prefix)}
        value = settings.get(candidate)
        if value is None and not section:
            continue
        if value is not None and value.strip():
            return ServiceBusConnection(connection_string=value.strip())
        namespace = next((v for k, v in section.items() if k.lower() == "fullyqualifiednamespace"), "")
        if not namespace.strip():
            raise BindingError(
                f"{where}: Connection should have an 'fullyQualifiedNamespace' property or be a "
                "string representing a connection string."
            )
        return ServiceBusConnection(fully_qualified_namespace=namespace.strip())
    raise BindingError(
        f"{where}: Service Bus account connection string '{setting}' does not exist. "
        "Make sure that it is a defined App Setting."
    )
