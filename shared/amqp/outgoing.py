"""A message Busbar sends over its own AMQP sender (:mod:`shared.amqp.sender`), and its AMQP encoding.

The copies Busbar makes of received messages (the re-drive's, the console's retry, the replay's, the
router's bridge, the ordered endpoint's parked ones) keep every application property's AMQP type, which
azure-servicebus can only be given in a private form. So they are built here from the envelope, and encoded
as azure-servicebus encodes a ``ServiceBusMessage`` (read in the installed 7.x SDK:
``_common/message.py``, the property setters; ``_transport/_pyamqp_transport.py``,
``to_outgoing_amqp_message``):

======================  =========================================================================
properties              message-id, correlation-id, group-id (SessionId), subject, content-type,
                        to, reply-to, reply-to-group-id
header ttl              whole seconds of TimeToLive, in milliseconds (the SDK's setter:
                        ``int(value.total_seconds()) * 1000``); none when unset or under a second
creation-time,          set with a ttl: now (whole seconds) and now + ttl, capped at the SDK's
absolute-expiry-time    ``MAX_ABSOLUTE_EXPIRY_TIME``
message annotation      ``x-opt-partition-key`` (a string)
body                    one data section (an empty one for no body)
application properties  each with its AMQP type (:func:`shared.amqp.values.proton_properties`)
======================  =========================================================================

As the SDK's setters do, a MessageId, SessionId or PartitionKey over 128 characters raises ``ValueError``
when the message is built, and so does an application property no AMQP type fits
(:class:`~shared.envelope.properties.PropertyTypeError`, a ``ValueError``), naming it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import proton

from shared.amqp.values import proton_properties
from shared.envelope import Envelope, PartitionKeyPolicy, copy_partition_key

PROPERTY_MAX_LENGTH = 128
"""The SDK's ``MESSAGE_PROPERTY_MAX_LENGTH`` (MessageId, SessionId, PartitionKey; Azure's quota too)."""
MAX_ABSOLUTE_EXPIRY_TIME_MS = 253402243199000
"""The SDK's cap on absolute-expiry-time (``_common/constants.py``): 9999-12-31T00:00:00Z less a day."""
MAX_TTL_MS = 2**32 - 1
"""The header's ttl is an AMQP uint of milliseconds."""
PARTITION_KEY = proton.symbol("x-opt-partition-key")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingMessage:
    """One message to send: a data body, the system properties a client sets, and application properties
    in Busbar's typed-value model (:mod:`shared.envelope.properties`). Its attributes are named as
    azure-servicebus's ``ServiceBusMessage`` names them."""

    body: bytes = b""
    message_id: str | None = None
    session_id: str | None = None
    partition_key: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    content_type: str | None = None
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    time_to_live: timedelta | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    _wire_properties: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("message_id", "session_id", "partition_key"):
            value = getattr(self, name)
            if value and len(value) > PROPERTY_MAX_LENGTH:
                raise ValueError(f"{name} cannot be longer than {PROPERTY_MAX_LENGTH} characters.")
        if self.partition_key and self.session_id is not None and self.partition_key != self.session_id:
            raise ValueError(
                f"partition_key:{self.partition_key} cannot be set to a different value than "
                f"session_id:{self.session_id}"
            )
        if self.time_to_live is not None and self.time_to_live.total_seconds() * 1000 > MAX_TTL_MS:
            raise ValueError(f"time_to_live {self.time_to_live} is longer than an AMQP ttl holds")
        # Converted once, here: a property that cannot be sent fails now, and every encoding reuses it.
        object.__setattr__(self, "_wire_properties", proton_properties(self.application_properties))

    def encoded(self, now: float | None = None) -> bytes:
        """The AMQP encoding of the message (``now``, epoch seconds, stamps the creation time of a message
        with a TimeToLive)."""
        return self.to_proton(now).encode()

    def to_proton(self, now: float | None = None) -> proton.Message:
        """The message as proton's ``Message``."""
        fields: dict[str, Any] = {
            "id": self.message_id,
            "correlation_id": self.correlation_id,
            "group_id": self.session_id,
            "subject": self.subject,
            "content_type": self.content_type,
            "address": self.to,
            "reply_to": self.reply_to,
            "reply_to_group_id": self.reply_to_session_id,
            "properties": self._wire_properties,
        }
        ttl_seconds = int(self.time_to_live.total_seconds()) if self.time_to_live is not None else 0
        if ttl_seconds > 0:
            created = int(time.time() if now is None else now)
            fields["ttl"] = ttl_seconds
            fields["creation_time"] = created
            fields["expiry_time"] = min(MAX_ABSOLUTE_EXPIRY_TIME_MS, (created + ttl_seconds) * 1000) // 1000
        if self.partition_key is not None:
            fields["annotations"] = {PARTITION_KEY: self.partition_key}
        # inferred: a bytes body goes as one data section (not an AMQP value of type binary)
        message = proton.Message(body=self.body, inferred=True, **fields)
        return message


def outgoing_message(envelope: Envelope, partition_key: PartitionKeyPolicy) -> OutgoingMessage:
    """A copy of ``envelope`` to send: its body and properties (the broker's stamps are not sent).

    ``partition_key`` decides a PartitionKey that conflicts with the SessionId (:func:`copy_partition_key`).
    A missing body is sent empty; a zero TimeToLive is left to the entity's default. Raises ``ValueError``
    (a :class:`~shared.envelope.properties.PropertyTypeError` naming the property) for what cannot be sent."""
    return OutgoingMessage(
        body=envelope.body if envelope.body is not None else b"",
        message_id=envelope.message_id,
        session_id=envelope.session_id,
        partition_key=copy_partition_key(envelope, partition_key),
        correlation_id=envelope.correlation_id,
        subject=envelope.subject,
        content_type=envelope.content_type,
        to=envelope.to,
        reply_to=envelope.reply_to,
        reply_to_session_id=envelope.reply_to_session_id,
        time_to_live=envelope.time_to_live or None,
        application_properties=dict(envelope.application_properties),
    )


__all__ = ["PROPERTY_MAX_LENGTH", "OutgoingMessage", "outgoing_message"]
