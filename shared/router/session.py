"""The SessionId of a bridged copy: the one the event arrived with, else its contract's ordering key.

Busbar's own publishers put every keyed event on the wire with its ordering key as ``SessionId``
(:func:`shared.contracts.ordering_key`), and a copy the router bridges keeps it, whatever it is: the
publisher chose it, and an ordered endpoint must see the copy in the session the original is in.

A .NET or NServiceBus publisher may not set one. Such an event would reach an ordered endpoint (a
session-enabled queue) without a session, which the broker refuses or dead-letters, and an unordered
endpoint gains nothing from its absence either. So when the contract is known here and keyed, the bridge
reads the key from the body, as the endpoint would (the first enclosed type this app knows, validated as the
dispatcher validates it), and the copy carries it.

When that body does not validate, or its key is empty, the copy goes out exactly as the event arrived,
without a SessionId, and :attr:`BridgeSession.problem` says why (the router logs it). Withholding the copy,
or failing the router's message over and over until it is dead-lettered on the router's subscription, would
keep it from the endpoints that may still read it; sent as it is, an unordered endpoint dead-letters it with
the precise validation error (``PayloadValidationFailed``), and an ordered endpoint's queue refuses it or
dead-letters it, so the event always ends up where an operator sees it.

Pure: no I/O; :class:`~shared.router.service.FallbackRouter` applies the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pydantic import ValidationError

from shared.contracts import ContractError, ContractRegistry, ordering_key
from shared.handlers.dispatch import describe_validation_error
from shared.messages import IncomingMessage


class SessionSource(Enum):
    """Where a bridged copy's SessionId comes from."""

    ARRIVED = "arrived"
    """The event arrived with one: kept as it is."""
    ORDERING_KEY = "ordering-key"
    """It arrived without one; its contract is keyed and the key was read from the body."""
    NONE = "none"
    """No SessionId: the contract is unknown here or not keyed, or its key could not be read."""


@dataclass(frozen=True, slots=True)
class BridgeSession:
    """The SessionId a bridged copy carries, where it comes from, and what kept the key from being read."""

    session_id: str | None
    source: SessionSource
    problem: str = ""
    """Set when a keyed contract's key could not be read: the copy goes without a SessionId."""


def bridge_session(message: IncomingMessage, contracts: ContractRegistry) -> BridgeSession:
    """The SessionId the bridged copy of ``message`` carries (see the module's docstring)."""
    if message.session_id is not None:
        return BridgeSession(message.session_id, SessionSource.ARRIVED)
    contract = next((c for c in map(contracts.get, message.enclosed_types) if c is not None), None)
    if contract is None or contract.ordering_key_field is None:
        return BridgeSession(None, SessionSource.NONE)
    field = contract.ordering_key_field
    try:
        event = contract.model_validate_json(message.body)
    except ValidationError as error:
        return BridgeSession(
            None,
            SessionSource.NONE,
            f"it has no SessionId and its body does not validate as {contract.contract_name}, so its "
            f"ordering key {field!r} cannot be read: {describe_validation_error(error)}",
        )
    try:
        key = ordering_key(event)
    except ContractError as error:
        return BridgeSession(None, SessionSource.NONE, f"it has no SessionId and {error}")
    return BridgeSession(key, SessionSource.ORDERING_KEY)
