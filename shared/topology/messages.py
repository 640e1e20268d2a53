"""The outgoing message of a publish: NServiceBus headers as application properties, a JSON body, the
correlation stamps of the CorrelationFilter routing mode (``MessageDispatcher.ApplyMultiplexingStamps``
and ``OutgoingMessageExtensions`` in the NServiceBus transport) and the contract's promoted fields
(:mod:`shared.promoted`), typed, for subscriptions that route by content."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from azure.servicebus import ServiceBusMessage

from shared.contracts import (
    ENCLOSED_MESSAGE_TYPES,
    Event,
    enclosed_types_header,
    ordering_key,
    parse_enclosed_types,
)
from shared.envelope.sdk import sdk_value
from shared.promoted import promoted_properties
from shared.topology.options import TopicRoutingMode

MESSAGE_ID = "NServiceBus.MessageId"
MESSAGE_INTENT = "NServiceBus.MessageIntent"
CONTENT_TYPE = "NServiceBus.ContentType"
CORRELATION_ID = "NServiceBus.CorrelationId"
CONVERSATION_ID = "NServiceBus.ConversationId"
TIME_SENT = "NServiceBus.TimeSent"
ORIGINATING_ENDPOINT = "NServiceBus.OriginatingEndpoint"
JSON_CONTENT_TYPE = "application/json"
PUBLISH_INTENT = "Publish"


def wire_time(moment: datetime) -> str:
    """NServiceBus's wire format for timestamps: ``yyyy-MM-dd HH:mm:ss:ffffff Z`` in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S:%f Z")


def correlation_stamps(enclosed_header: str) -> dict[str, bool]:
    """``{type: True}`` for every type the enclosed-types header lists, parsed as NServiceBus does."""
    return dict.fromkeys(parse_enclosed_types(enclosed_header), True)


def publish_headers(
    event: Event,
    *,
    endpoint_name: str,
    message_id: str | None = None,
    correlation_id: str | None = None,
    conversation_id: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, str]:
    """The NServiceBus headers of publishing ``event``.

    Caller ``headers`` come first; the identity headers (message id, intent, content type, enclosed
    types, time sent, originating endpoint) always win, so a caller cannot make a message lie about
    what it carries. A new conversation starts with correlation id = message id, as in NServiceBus."""
    message_id = message_id or str(uuid.uuid4())
    out: dict[str, str] = dict(headers or {})
    out[CORRELATION_ID] = correlation_id or out.get(CORRELATION_ID) or message_id
    out[CONVERSATION_ID] = conversation_id or out.get(CONVERSATION_ID) or str(uuid.uuid4())
    out[MESSAGE_ID] = message_id
    out[MESSAGE_INTENT] = PUBLISH_INTENT
    out[CONTENT_TYPE] = JSON_CONTENT_TYPE
    out[ENCLOSED_MESSAGE_TYPES] = enclosed_types_header(type(event))
    out[TIME_SENT] = wire_time(now or datetime.now(UTC))
    out[ORIGINATING_ENDPOINT] = endpoint_name
    return out


def message_body(event: Event) -> str:
    """The JSON body of the message that publishes ``event`` (what Service Bus counts, with the headers,
    against its maximum message size)."""
    return event.model_dump_json(by_alias=True)


def build_message(
    event: Event,
    routing_mode: TopicRoutingMode,
    *,
    endpoint_name: str,
    message_id: str | None = None,
    correlation_id: str | None = None,
    conversation_id: str | None = None,
    headers: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> ServiceBusMessage:
    """The ``ServiceBusMessage`` that publishes ``event``: JSON body, every header as an application
    property, ``CorrelationId`` and ``ContentType`` promoted, the contract's ordering key as ``SessionId``
    (:func:`ordering_key`; an empty key raises :class:`~shared.contracts.ContractError`), for
    CorrelationFilter one boolean ``True`` property per enclosed type, and each promoted field
    (:func:`~shared.promoted.promoted_properties`) under its own name with its AMQP type (an int as a long).

    The broker ``MessageId`` is the ``NServiceBus.MessageId`` header (``message_id``, fresh when not
    given). NServiceBus's transport gives the native message a fresh GUID instead ("Cannot re-use
    MessageId to be compatible with ASB transport that could have native de-dup enabled",
    ``OutgoingMessageExtensions.ToAzureServiceBusMessage``): it re-sends messages under their own header
    id (ServiceControl retries) and so must never let the broker drop them. Busbar wants the opposite:
    a retried publish or a retried handler's outgoing message carries the same deterministic id
    (:mod:`shared.topology.message_ids`) and the broker must drop it; its own re-sends (re-drive, console
    retry, replay) wait out the window instead. The header stays NServiceBus's logical id, the one an
    NServiceBus receiver reads (``NServiceBus.MessageId`` wins over the native id), so both are equal."""
    session_id = ordering_key(event)
    values = publish_headers(
        event,
        endpoint_name=endpoint_name,
        message_id=message_id,
        correlation_id=correlation_id,
        conversation_id=conversation_id,
        headers=headers,
        now=now,
    )
    properties: dict[str | bytes, Any] = dict(values.items())
    if routing_mode is TopicRoutingMode.CorrelationFilter:
        properties.update(correlation_stamps(values[ENCLOSED_MESSAGE_TYPES]))
    # Typed as azure-servicebus must be given them (a plain int goes out as a 32-bit int, or fails).
    promoted = promoted_properties(event, reserved=(str(name) for name in properties))
    properties.update({name: sdk_value(value) for name, value in promoted.items()})
    return ServiceBusMessage(
        message_body(event),
        application_properties=properties,
        message_id=values[MESSAGE_ID],
        correlation_id=values[CORRELATION_ID],
        content_type=JSON_CONTENT_TYPE,
        session_id=session_id,
    )
