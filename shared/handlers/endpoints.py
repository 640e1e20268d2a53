"""An endpoint: a named input queue plus the events it handles.

The queue's name comes from the app setting derived from the endpoint's name (:func:`queue_setting_name`:
``BUSBAR_<NAME>_QUEUE``, the name upper-cased with every other character than a letter or digit as ``_``),
and defaults to the endpoint's name: endpoint ``loyalty`` listens on queue ``loyalty`` unless
``BUSBAR_LOYALTY_QUEUE`` names another.

The endpoint owns its queue (NServiceBus "queue ownership"): each of its subscriptions auto-forwards into that
queue, and one Service Bus-triggered function drains it through a
:class:`~shared.handlers.dispatch.Dispatcher`. The events it subscribes to are exactly the contracts its
handlers are registered for.

An **ordered** endpoint handles the events of one ordering key (:func:`shared.contracts.ordering_key`) one at
a time, in the order they were published: its input queue requires sessions and its trigger is
session-enabled. Every contract it can receive must therefore have an ordering key (a message without a
``SessionId`` cannot enter a session-enabled queue); declaring one that does not is an error at start-up
naming the endpoint and the contract.

A handler registered with a condition (``where=``) makes the endpoint's subscription of that event route by
content (:mod:`shared.handlers.conditions`); handlers that would see one event under different conditions
are refused at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from shared.app_settings import AppSetting, read
from shared.contracts import ContractError, ContractRegistry
from shared.handlers.conditions import condition_conflicts, subscriptions
from shared.handlers.dispatch import Dispatcher, HandlerRegistry
from shared.topology.desired import SubscribedEvent


def queue_setting_name(endpoint_name: str) -> str:
    """The app setting naming ``endpoint_name``'s input queue: ``BUSBAR_<NAME>_QUEUE``, the name upper-cased
    with every character other than an ASCII letter or digit as ``_`` (``order-history``:
    ``BUSBAR_ORDER_HISTORY_QUEUE``)."""
    return f"BUSBAR_{re.sub(r'[^A-Za-z0-9]', '_', endpoint_name).upper()}_QUEUE"


@dataclass(frozen=True)
class Endpoint:
    """A named endpoint: its contracts, its handlers and whether it is ordered; its input queue is named by
    :attr:`queue_setting` (default: the endpoint's name)."""

    name: str
    contracts: ContractRegistry
    handlers: HandlerRegistry
    ordered: bool = field(default=False, kw_only=True)
    """Handle each ordering key's events one at a time in publish order (a session-enabled queue)."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ContractError("an endpoint needs a name (its queue and trigger are named after it)")
        conflicts = condition_conflicts(self.name, self.handlers.registrations(), self.contracts)
        if conflicts:
            raise ContractError("; ".join(conflicts))
        if self.ordered:
            missing = self.unkeyed_contracts()
            if missing:
                raise ContractError(
                    f"endpoint {self.name!r} is ordered, but it handles {', '.join(missing)} without an "
                    "ordering key: declare ordering_key=<field> on the contract (or on an interface it "
                    "implements), or make the endpoint unordered"
                )

    def received_contracts(self) -> list[str]:
        """Every concrete contract this endpoint can receive: each handled name and its implementers."""
        names: list[str] = []
        for handled in self.subscribed_events():
            for klass in self.contracts.implementers(handled):
                if klass.contract_name not in names:
                    names.append(klass.contract_name)
        return names

    def unkeyed_contracts(self) -> list[str]:
        """The contracts this endpoint receives that have no ordering key (an ordered endpoint has none)."""
        return [
            name
            for name in self.received_contracts()
            if self.contracts.resolve(name).ordering_key_field is None
        ]

    @property
    def queue_setting(self) -> AppSetting:
        """The app setting naming the input queue (:func:`queue_setting_name`); default: the endpoint's
        name."""
        return AppSetting(
            queue_setting_name(self.name), f"Input queue of the {self.name} endpoint.", default=self.name
        )

    def queue(self, env: Mapping[str, str] | None = None) -> str:
        """The input queue's name: the value of :attr:`queue_setting` in ``env`` (default: the process
        environment), else the endpoint's name."""
        return read(self.queue_setting, env) or self.name

    def subscribed_events(self) -> list[str]:
        """The contract names this endpoint subscribes to: those its handlers handle."""
        return self.handlers.handled_contracts()

    def subscriptions(self) -> list[SubscribedEvent]:
        """What this endpoint subscribes to, each handled contract with its handlers' condition (routing by
        content: :mod:`shared.handlers.conditions`); what its desired topology is planned from."""
        return subscriptions(self.handlers.registrations())

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

    def contracts(self) -> ContractRegistry:
        """Every contract of the endpoints' registries (what each handles and publishes), in one registry;
        a contract name two endpoints bind to different classes is a :class:`ContractError` at start-up."""
        return ContractRegistry.union(*(e.contracts for e in self._by_name.values()))

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._by_name.values())
