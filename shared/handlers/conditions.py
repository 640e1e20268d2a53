"""Handler conditions: a handler registered ``where="amount >= 1000"`` makes its endpoint subscribe to the
event only when its content matches (:mod:`shared.topology.content_filters`), so the broker, not the handler,
drops the events the endpoint does not want.

An endpoint receives each event through one subscription rule, and its dispatcher runs every handler of the
contracts the message encloses. Two handlers of one endpoint that would see the same event under different
conditions (one filtered, one not; or two filters) cannot both be served: the rule would have to admit
either condition's events, and each handler would then run on the other's. Such an endpoint is refused when
it is declared (:func:`condition_conflicts`), naming both handlers: give them one condition (combined with
OR), or put them on separate endpoints. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from shared.contracts import ContractError, ContractRegistry, Event, enclosed_types
from shared.topology.content_filters import ContentFilter, content_filter_errors
from shared.topology.desired import SubscribedEvent
from shared.topology.errors import TopologyValidationError


class Registration(Protocol):
    """A handler registration (``shared.handlers.dispatch.Registration``, which imports this module)."""

    @property
    def contract(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def condition(self) -> ContentFilter | None: ...


def handler_condition(
    event_type: type[Event], where: str | Mapping[str, str | int | float | bool]
) -> ContentFilter:
    """The condition of a handler of ``event_type``; :class:`ContractError` naming the problem when it does
    not parse or reads a property the contract does not promote (an interface's promoted fields are
    promoted by all its implementers, so a condition on an interface may read those)."""
    name = event_type.contract_name
    try:
        condition = ContentFilter.parse(where, name)
    except TopologyValidationError as error:
        raise ContractError("; ".join(error.errors)) from None
    errors = content_filter_errors([SubscribedEvent(name, filter=condition)], ContractRegistry(event_type))
    if errors:
        raise ContractError("; ".join(errors))
    return condition


def subscriptions(registrations: Sequence[Registration]) -> list[SubscribedEvent]:
    """One subscribed event per handled contract, in first-registration order, with its condition (the
    first registration's: :func:`condition_conflicts` makes them all one)."""
    found: dict[str, SubscribedEvent] = {}
    for registration in registrations:
        found.setdefault(
            registration.contract, SubscribedEvent(registration.contract, filter=registration.condition)
        )
    return list(found.values())


def condition_conflicts(
    endpoint: str, registrations: Sequence[Registration], contracts: ContractRegistry
) -> list[str]:
    """Why ``endpoint``'s handlers cannot share its subscriptions: per concrete contract it receives, the
    handlers that would see it under different conditions (empty: none do)."""
    problems: list[str] = []
    for concrete in contracts.concrete():
        names = enclosed_types(concrete)
        seeing = [r for r in registrations if r.contract in names]
        if len({r.condition for r in seeing}) < 2:
            continue
        described = ", ".join(f"{r.name} ({_described(r.condition)})" for r in seeing)
        problems.append(
            f"endpoint {endpoint!r} would receive {concrete.contract_name} under different conditions: "
            f"{described}; one subscription rule serves them all and every one of those handlers runs on "
            "what it admits, so give them one condition (combine them with OR) or host them on separate "
            "endpoints"
        )
    return problems


def _described(condition: ContentFilter | None) -> str:
    return "every event" if condition is None else f"where {condition.to_json()!r}"
