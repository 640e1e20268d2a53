"""An ordered endpoint subscribes only to contracts with an ordering key.

An ordered endpoint's input queue requires sessions (:mod:`shared.topology.queues`). A message without a
``SessionId`` that a subscription forwards towards such a queue never reaches it: Service Bus dead-letters it
in the subscription ("Session ID is null."; the emulator does the same, see ``emulator/broker/routing.py``).
Busbar sets ``SessionId`` from the contract's ordering key (:func:`shared.contracts.ordering_key`) and only
from it, so an event whose contract has no key would be dead-lettered every time it is published. Such a
subscription is refused before anything is provisioned (:func:`require_keyed`), by the provisioning API's
``PUT`` and by ``python -m shared.topology plan|apply --ordered``, naming the endpoint and the contract.

What counts as unkeyed: a contract the registry does not know (its key cannot be known); a concrete contract
without a key; an interface that does not declare a key and has an implementer the registry knows without
one, or no implementer the registry knows at all (nothing says its events carry a key). An interface that
declares a key passes it on to every implementer (:class:`shared.contracts.Event`).
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.contracts import ContractRegistry
from shared.topology.errors import TopologyValidationError


class UnkeyedSubscriptionError(TopologyValidationError):
    """An ordered endpoint would subscribe to a contract without an ordering key (one error per contract,
    each naming the endpoint and the contract)."""

    def __init__(self, endpoint: str, unkeyed: list[str], errors: list[str]) -> None:
        super().__init__(errors)
        self.endpoint = endpoint
        self.unkeyed = unkeyed


def why_unkeyed(contracts: ContractRegistry, event: str) -> str | None:
    """Why a subscription to ``event`` (a contract or interface name) can bring a message without an
    ordering key, or ``None`` when every message it brings has one."""
    known = contracts.get(event)
    if known is None:
        return "it is not a contract the app knows, so its ordering key is unknown"
    if known.ordering_key_field is not None:
        return None  # inherited by every implementer, which cannot declare another
    implementers = contracts.implementers(event)
    if not implementers:
        return "it declares no ordering key and the app knows no implementer of it"
    unkeyed = [c.contract_name for c in implementers if c.ordering_key_field is None]
    if not unkeyed:
        return None
    if unkeyed == [event]:
        return "it declares no ordering key"
    return f"its implementer(s) {', '.join(unkeyed)} have no ordering key"


def require_keyed(endpoint: str, contracts: ContractRegistry, events: Iterable[str]) -> None:
    """Raise :class:`UnkeyedSubscriptionError` when the ordered ``endpoint`` would subscribe to an event
    that can come without an ordering key (every such event named at once)."""
    unkeyed: list[str] = []
    errors: list[str] = []
    for event in dict.fromkeys(events):
        reason = why_unkeyed(contracts, event)
        if reason is None:
            continue
        unkeyed.append(event)
        errors.append(
            f"endpoint {endpoint} is ordered, but it would subscribe to {event}, and {reason}: its "
            "input queue requires sessions, and Service Bus dead-letters in the subscription every "
            "message forwarded there without a SessionId. Declare ordering_key=<field> on the contract "
            "(or on an interface it implements), or subscribe an unordered endpoint. Nothing was "
            "provisioned."
        )
    if errors:
        raise UnkeyedSubscriptionError(endpoint, unkeyed, errors)


__all__ = ["UnkeyedSubscriptionError", "require_keyed", "why_unkeyed"]
