"""An endpoint: a named input queue plus the events it handles.

The endpoint owns its queue (NServiceBus "queue ownership"): each of its subscriptions auto-forwards into that
queue, and one Service Bus-triggered function drains it through a
:class:`~shared.handlers.dispatch.Dispatcher`. The events it subscribes to are exactly the contracts its
handlers are registered for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from shared.app_settings import AppSetting, read
from shared.contracts import ContractRegistry
from shared.handlers.dispatch import Dispatcher, HandlerRegistry


@dataclass(frozen=True)
class Endpoint:
    """A named endpoint: its queue setting, its contracts and its handlers."""

    name: str
    queue_setting: AppSetting
    contracts: ContractRegistry
    handlers: HandlerRegistry

    def queue(self, env: Mapping[str, str] | None = None) -> str:
        """The input queue's name, from the endpoint's app setting (or its default)."""
        value = read(self.queue_setting, env)
        if not value:
            raise ValueError(
                f"app setting {self.queue_setting.name} (queue of endpoint {self.name}) is empty"
            )
        return value

    def subscribed_events(self) -> list[str]:
        """The contract names this endpoint subscribes to: those its handlers handle."""
        return self.handlers.handled_contracts()

    def dispatcher(self) -> Dispatcher:
        """A dispatcher running this endpoint's handlers."""
        return Dispatcher(self.name, self.contracts, self.handlers)


class EndpointCatalog:
    """The endpoints this app hosts, by name (the ``{endpoint}`` of the HTTP routes)."""

    def __init__(self, *endpoints: Endpoint) -> None:
        self._by_name: dict[str, Endpoint] = {}
        for endpoint in endpoints:
            if endpoint.name in self._by_name:
                raise ValueError(f"endpoint {endpoint.name!r} is declared twice")
            self._by_name[endpoint.name] = endpoint

    def get(self, name: str) -> Endpoint | None:
        """The endpoint called ``name``, or None."""
        return self._by_name.get(name)

    def names(self) -> list[str]:
        """Every endpoint name, sorted."""
        return sorted(self._by_name)

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._by_name.values())
