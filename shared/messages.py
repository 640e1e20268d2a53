"""Busbar's own view of a received Service Bus message, independent of how it was received.

The Functions trigger hands over an ``azure.functions.ServiceBusMessage`` (or, with the SDK-type binding, an
``azure.servicebus.ServiceBusReceivedMessage``); ``functions/convert.py`` turns either into an
:class:`IncomingMessage` so dispatch, routing and handlers never depend on the trigger's types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.contracts import ENCLOSED_MESSAGE_TYPES, parse_enclosed_types


def as_text(value: object) -> str | None:
    """A system or application property from the SDK as text: None stays None, bytes (as the SDK hands
    strings back) are decoded as UTF-8, anything else is ``str()``-ed."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


CONVERSATION_ID = "NServiceBus.ConversationId"
"""Header carrying the conversation a message belongs to; copied onto everything a handler sends."""

RELATED_TO = "NServiceBus.RelatedTo"
"""Header naming the message id of the message whose handler sent this one."""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A received message: body, broker properties and application properties (NServiceBus headers)."""

    body: bytes
    message_id: str | None = None
    content_type: str | None = None
    correlation_id: str | None = None
    session_id: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    to: str | None = None
    partition_key: str | None = None
    time_to_live_seconds: float | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    delivery_count: int | None = None
    sequence_number: int | None = None
    enqueued_time: datetime | None = None
    dead_letter_source: str | None = None

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
