"""Busbar's own view of a message a trigger received, independent of how it was received.

The SDK-type binding hands over an ``azure.servicebus.ServiceBusReceivedMessage``; ``functions/convert.py``
turns it into an :class:`IncomingMessage` (an :class:`~shared.envelope.Envelope` through
:mod:`shared.envelope.sdk`) so dispatch, routing and handlers never depend on the trigger's types.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts import ENCLOSED_MESSAGE_TYPES, parse_enclosed_types
from shared.envelope import Envelope, as_text

__all__ = ["CONVERSATION_ID", "RELATED_TO", "IncomingMessage", "as_text"]


CONVERSATION_ID = "NServiceBus.ConversationId"
"""Header carrying the conversation a message belongs to; copied onto everything a handler sends."""

RELATED_TO = "NServiceBus.RelatedTo"
"""Header naming the message id of the message whose handler sent this one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingMessage(Envelope):
    """A received message: body, broker properties and application properties (NServiceBus headers).

    Its body is always bytes (:func:`shared.envelope.sdk.readable_body`), so dispatch can read any message.
    """

    body: bytes

    @property
    def enclosed_types(self) -> list[str]:
        """The parsed ``NServiceBus.EnclosedMessageTypes`` header; empty when absent or not text."""
        raw = self.application_properties.get(ENCLOSED_MESSAGE_TYPES)
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        if not isinstance(raw, str):
            return []
        return parse_enclosed_types(raw)

    @property
    def contract_type(self) -> str | None:
        """The first (most concrete) enclosed type, if any."""
        names = self.enclosed_types
        return names[0] if names else None

    def property_text(self, name: str) -> str | None:
        """An application property as text, or None when absent."""
        return as_text(self.application_properties.get(name))
