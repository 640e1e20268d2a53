"""What a handler gets besides its event: the incoming message and a way to publish and send.

Handlers never talk to Service Bus themselves. :class:`HandlerContext` records the events a handler publishes
and the commands it sends; the caller dispatches them only after every handler of the message succeeded, so
a message that is retried or dead-lettered leaves nothing half-sent behind (the NServiceBus "batched
dispatch" behaviour). Everything sent carries the incoming message's correlation over:

- ``CorrelationId``: the incoming correlation id, else the incoming message id;
- ``NServiceBus.ConversationId``: the incoming conversation id, else the incoming message id;
- ``NServiceBus.RelatedTo``: the incoming message id.

Each outgoing event carries its own contract's ordering key as its ``SessionId`` (never the incoming
message's). A keyed event whose key is empty is refused where the handler publishes or sends it, so the
handler fails (and is retried) instead of the dispatch failing halfway through what was already sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts import ContractError, Event, ordering_key
from shared.handlers.store import HandlerStore
from shared.messages import CONVERSATION_ID, RELATED_TO, IncomingMessage


@dataclass(frozen=True, slots=True)
class OutgoingPublish:
    """An event to publish through the topology."""

    event: Event


@dataclass(frozen=True, slots=True)
class OutgoingSend:
    """A message to send to one queue (a command)."""

    destination: str
    message: Event


Outgoing = OutgoingPublish | OutgoingSend


class HandlerContext:
    """The context of one incoming message while its handlers run."""

    def __init__(
        self, incoming: IncomingMessage, endpoint_name: str, store: HandlerStore | None = None
    ) -> None:
        self.incoming = incoming
        self.endpoint_name = endpoint_name
        self.store = store or HandlerStore()
        """The handlers' rows, committed with the message's record (:mod:`shared.handlers.store`)."""
        self._outgoing: list[Outgoing] = []

    @property
    def message_id(self) -> str | None:
        """The incoming message's id."""
        return self.incoming.message_id

    @property
    def correlation_id(self) -> str | None:
        """The correlation id outgoing messages get: the incoming one, else the incoming message id."""
        return self.incoming.correlation_id or self.incoming.message_id

    @property
    def conversation_id(self) -> str | None:
        """The conversation outgoing messages join: the incoming one, else the incoming message id."""
        return self.incoming.property_text(CONVERSATION_ID) or self.incoming.message_id

    def publish(self, event: Event) -> None:
        """Publish ``event`` once every handler of the incoming message has succeeded (an abstract
        contract, or an empty ordering key, raises :class:`~shared.contracts.ContractError` now)."""
        _require_sendable(event)
        self._outgoing.append(OutgoingPublish(event))

    def send(self, destination: str, message: Event) -> None:
        """Send ``message`` to the queue ``destination`` once every handler has succeeded (checked now as
        :meth:`publish` checks)."""
        if not destination or destination != destination.strip():
            raise ValueError(f"send: destination must be a queue name, got {destination!r}")
        _require_sendable(message)
        self._outgoing.append(OutgoingSend(destination, message))

    @property
    def outgoing(self) -> tuple[Outgoing, ...]:
        """What the handlers published and sent, in order."""
        return tuple(self._outgoing)

    def outgoing_headers(self) -> dict[str, str]:
        """The headers every outgoing message carries (conversation and causation)."""
        headers: dict[str, str] = {}
        if self.conversation_id:
            headers[CONVERSATION_ID] = self.conversation_id
        if self.incoming.message_id:
            headers[RELATED_TO] = self.incoming.message_id
        return headers


def _require_sendable(message: Event) -> None:
    if type(message).is_abstract:
        raise ContractError(
            f"{type(message).__qualname__} is an abstract contract and cannot be published or sent"
        )
    ordering_key(message)  # raises for an empty or too long key: the message could not be sent
