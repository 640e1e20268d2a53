"""A message as the broker holds it: the client's sections plus broker state (sequence number, locks,
delivery count), and its encodings for delivery and for the store."""

from __future__ import annotations

import enum
import uuid
from asyncio import TimerHandle
from dataclasses import dataclass, field, replace
from typing import Any

from emulator.encoding.property_map import splice_application_properties
from shared.amqp.encoding.sections import (
    DELIVERY_ANNOTATIONS,
    HEADER,
    MESSAGE_ANNOTATIONS,
    HeaderField,
    ParsedMessage,
    PropertiesField,
    parse_message,
    section,
)
from shared.amqp.encoding.types import Long, Symbol, Timestamp, UByte, UInt

SEQUENCE_NUMBER = Symbol("x-opt-sequence-number")
ENQUEUED_TIME = Symbol("x-opt-enqueued-time")
LOCKED_UNTIL = Symbol("x-opt-locked-until")
ENQUEUE_SEQUENCE_NUMBER = Symbol("x-opt-enqueue-sequence-number")
SCHEDULED_ENQUEUE_TIME = Symbol("x-opt-scheduled-enqueue-time")
PARTITION_KEY = Symbol("x-opt-partition-key")
DEAD_LETTER_SOURCE = Symbol("x-opt-deadletter-source")
MESSAGE_STATE = Symbol("x-opt-message-state")
LOCK_TOKEN = Symbol("x-opt-lock-token")
# Annotations the broker owns: a client's values for these are replaced, never trusted.
BROKER_ANNOTATIONS = frozenset(
    {SEQUENCE_NUMBER, ENQUEUED_TIME, LOCKED_UNTIL, ENQUEUE_SEQUENCE_NUMBER, DEAD_LETTER_SOURCE, MESSAGE_STATE}
)


class MessageState(enum.IntEnum):
    """``x-opt-message-state`` values (the SDK's ServiceBusMessageState)."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


@dataclass(slots=True, eq=False)
class StoredMessage:
    """One message in one entity (queue, subscription or dead-letter sub-queue)."""

    parsed: ParsedMessage
    sequence_number: int = 0
    enqueued_ms: int = 0
    expires_ms: int | None = None
    delivery_count: int = 0
    state: MessageState = MessageState.ACTIVE
    scheduled_ms: int | None = None
    dead_letter_source: str | None = None
    # Runtime only, never stored: locks do not survive a restart.
    lock_token: uuid.UUID | None = None
    locked_until_ms: int = 0
    lock_timer: TimerHandle | None = field(default=None, repr=False)
    lock_owner: object | None = field(default=None, repr=False)
    available: bool = False

    @property
    def message_id(self) -> str | None:
        value = self.parsed.prop(PropertiesField.MESSAGE_ID)
        return None if value is None else str(value)

    @property
    def session_id(self) -> str | None:
        value = self.parsed.prop(PropertiesField.GROUP_ID)
        return None if value is None else str(value)

    @property
    def ttl_ms(self) -> int | None:
        value = self.parsed.header_field(HeaderField.TTL)
        return int(value) if value else None

    @property
    def size(self) -> int:
        return self.parsed.size

    @property
    def application_properties(self) -> dict[Any, Any]:
        return self.parsed.application_properties or {}

    def set_application_properties(self, updates: dict[str, Any]) -> None:
        """Merge ``updates`` into the application properties; the other entries keep their encoding.

        Azure keeps each untouched property's AMQP type when it stamps a dead letter's reason, so the
        section is spliced rather than re-encoded from decoded values (which would lose integer widths).
        Copy-on-write: a topic's subscriptions may share one parsed message."""
        props = dict(self.parsed.application_properties or {})
        props.update(updates)
        self.parsed = replace(
            self.parsed,
            application_properties=props,
            application_properties_raw=splice_application_properties(
                self.parsed.application_properties_raw, updates
            ),
        )

    def set_ttl(self, ceiling_ms: int) -> None:
        """Cap the message's own time to live at ``ceiling_ms`` (copy-on-write, like the properties)."""
        self.parsed = with_ttl(self.parsed, ceiling_ms)

    def copy_for(self, sequence_number: int, enqueued_ms: int) -> StoredMessage:
        """A fresh copy of this message for another entity (forwarding, dead-letter forwarding)."""
        parsed = ParsedMessage(
            header=list(self.parsed.header) if self.parsed.header is not None else None,
            delivery_annotations=dict(self.parsed.delivery_annotations),
            message_annotations=dict(self.parsed.message_annotations),
            properties=self.parsed.properties,
            properties_raw=self.parsed.properties_raw,
            application_properties=self.parsed.application_properties,
            application_properties_raw=self.parsed.application_properties_raw,
            body_raw=self.parsed.body_raw,
            footer_raw=self.parsed.footer_raw,
        )
        return StoredMessage(parsed=parsed, sequence_number=sequence_number, enqueued_ms=enqueued_ms)

    def _header(self) -> list[Any]:
        h = self.parsed.header or []
        durable = h[HeaderField.DURABLE] if len(h) > HeaderField.DURABLE else None
        priority = h[HeaderField.PRIORITY] if len(h) > HeaderField.PRIORITY else None
        ttl = h[HeaderField.TTL] if len(h) > HeaderField.TTL else None
        return [
            durable,
            None if priority is None else UByte(priority),
            None if ttl is None else UInt(ttl),
            None,
            UInt(self.delivery_count),
        ]

    def _annotations(self, locked_until_ms: int | None, with_state: bool) -> dict[Any, Any]:
        annotations = {
            k: v for k, v in self.parsed.message_annotations.items() if k not in BROKER_ANNOTATIONS
        }
        annotations[SEQUENCE_NUMBER] = Long(self.sequence_number)
        annotations[ENQUEUED_TIME] = Timestamp(self.enqueued_ms)
        if locked_until_ms is not None:
            annotations[LOCKED_UNTIL] = Timestamp(locked_until_ms)
        if self.dead_letter_source is not None:
            annotations[DEAD_LETTER_SOURCE] = self.dead_letter_source
        if with_state:
            annotations[MESSAGE_STATE] = Long(int(self.state))
        return annotations

    def encode_for_delivery(
        self,
        locked_until_ms: int | None = None,
        with_state: bool = False,
        lock_token: uuid.UUID | None = None,
        over_link: bool = False,
    ) -> bytes:
        """The message as a receiver gets it: broker header and annotations, client sections verbatim.

        A peek-lock delivery carries its lock token in the delivery annotations (``x-opt-lock-token``), as
        Azure's do: the SDK prefers the delivery tag; the Functions Service Bus extension reads it here.
        A delivery over a receive link always has the delivery-annotations section, empty in
        receive-and-delete, as Azure's has (the SDK's LegacyMessage shows ``{}``, not None). The message
        annotations are the sequence number and enqueued time (and the lock's end): no
        ``x-opt-enqueue-sequence-number``, which Azure does not send for a message sent to the entity."""
        p = self.parsed
        delivery = dict(p.delivery_annotations)
        if lock_token is not None:
            delivery[LOCK_TOKEN] = lock_token
        return b"".join(
            (
                section(HEADER, self._header()),
                section(DELIVERY_ANNOTATIONS, delivery) if delivery or over_link else b"",
                section(MESSAGE_ANNOTATIONS, self._annotations(locked_until_ms, with_state)),
                p.properties_raw,
                p.application_properties_raw,
                p.body_raw,
                p.footer_raw,
            )
        )

    def encode_for_store(self) -> bytes:
        """The client's sections, for the store (broker state lives in the store's columns)."""
        p = self.parsed
        parts = [section(HEADER, p.header)] if p.header is not None else []
        if p.delivery_annotations:
            parts.append(section(DELIVERY_ANNOTATIONS, p.delivery_annotations))
        client_annotations = {k: v for k, v in p.message_annotations.items() if k not in BROKER_ANNOTATIONS}
        if client_annotations:
            parts.append(section(MESSAGE_ANNOTATIONS, client_annotations))
        parts += [p.properties_raw, p.application_properties_raw, p.body_raw, p.footer_raw]
        return b"".join(parts)

    @classmethod
    def from_store(
        cls,
        blob: bytes,
        sequence_number: int,
        enqueued_ms: int,
        expires_ms: int | None,
        delivery_count: int,
        state: int,
        scheduled_ms: int | None,
        dead_letter_source: str | None,
    ) -> StoredMessage:
        """Rebuild a message from a store row."""
        return cls(
            parsed=parse_message(blob),
            sequence_number=sequence_number,
            enqueued_ms=enqueued_ms,
            expires_ms=expires_ms,
            delivery_count=delivery_count,
            state=MessageState(state),
            scheduled_ms=scheduled_ms,
            dead_letter_source=dead_letter_source,
        )


def with_ttl(parsed: ParsedMessage, ceiling_ms: int) -> ParsedMessage:
    """``parsed`` with its own time to live capped at ``ceiling_ms`` (a copy when it changes).

    Azure (message-expiration.md): a longer TimeToLive is "silently adjusted" to the entity default, so the
    receiver sees the adjusted value; a message sent without one keeps its header TTL unset (the default
    governs its expiry only)."""
    ttl = parsed.header_field(HeaderField.TTL)
    if not ttl or int(ttl) <= ceiling_ms:
        return parsed
    header = list(parsed.header or [])
    header[HeaderField.TTL] = ceiling_ms
    return replace(parsed, header=header)
