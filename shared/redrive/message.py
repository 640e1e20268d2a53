"""A dead-lettered message as the re-drive sees it: SDK-independent, with typed application properties,
and its archive row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.archive.properties import PropertyValue, encode_properties, normalise_received
from shared.archive.writer import ArchiveRow
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.messages import as_text
from shared.redrive.entities import EntityRef

REDRIVE_PREFIX = "busbar.redrive."
REDRIVE_COUNT = "busbar.redrive.count"
REDRIVE_AT = "busbar.redrive.at"
DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")
"""Broker-set properties that describe the *previous* failure; they never travel on a re-driven copy."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message received from a dead-letter queue (the settlement handle stays with the runner)."""

    source: EntityRef
    sequence_number: int
    body: bytes | None  # None: not an AMQP data body (value or sequence), which is never re-sent
    body_type: str
    application_properties: Mapping[str, PropertyValue]
    message_id: str | None = None
    session_id: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    content_type: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    to: str | None = None
    partition_key: str | None = None
    time_to_live: timedelta | None = None
    enqueued_time: datetime | None = None
    delivery_count: int | None = None
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None
    dead_letter_source: str | None = None

    @property
    def redrive_count(self) -> int:
        """How many times Busbar has re-driven this message before (``busbar.redrive.count``)."""
        value = self.application_properties.get(REDRIVE_COUNT)
        if isinstance(value, bool) or not isinstance(value, int | str):
            return 0
        try:
            return max(0, int(value))
        except ValueError:
            return 0

    @property
    def last_redrive_at(self) -> datetime | None:
        """When Busbar last sent a copy of this message (``busbar.redrive.at``), if it did."""
        value = self.application_properties.get(REDRIVE_AT)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int) and not isinstance(value, bool):
            # The SDK hands AMQP timestamps back as epoch milliseconds.
            return datetime.fromtimestamp(value / 1000, UTC)
        return None

    @property
    def contract_type(self) -> str | None:
        """The first NServiceBus enclosed message type, if the message names one."""
        value = self.application_properties.get(ENCLOSED_MESSAGE_TYPES)
        if not isinstance(value, str) or not value.strip():
            return None
        return value.split(";", 1)[0].strip() or None


def from_received(message: Any, source: EntityRef) -> DeadLetter:
    """A :class:`DeadLetter` from an azure-servicebus ``ServiceBusReceivedMessage``."""
    body_type = getattr(message.body_type, "value", str(message.body_type))
    body: bytes | None = None
    if body_type == "data":
        raw = message.body
        body = raw if isinstance(raw, bytes) else b"".join(raw)
    return DeadLetter(
        source=source,
        sequence_number=int(message.sequence_number),
        body=body,
        body_type=str(body_type),
        application_properties=normalise_received(message.application_properties),
        message_id=as_text(message.message_id),
        session_id=as_text(message.session_id),
        correlation_id=as_text(message.correlation_id),
        subject=as_text(message.subject),
        content_type=as_text(message.content_type),
        reply_to=as_text(message.reply_to),
        reply_to_session_id=as_text(message.reply_to_session_id),
        to=as_text(message.to),
        partition_key=as_text(message.partition_key),
        time_to_live=message.time_to_live,
        enqueued_time=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        dead_letter_reason=as_text(message.dead_letter_reason),
        dead_letter_description=as_text(message.dead_letter_error_description),
        dead_letter_source=as_text(message.dead_letter_source),
    )


def archive_row(
    dead_letter: DeadLetter,
    *,
    run_id: str,
    archived_at: datetime,
    decision: str,
    detail: str | None,
    target_entity: str | None,
) -> ArchiveRow:
    """The archive row for ``dead_letter``: every property it arrived with, nothing dropped."""
    source = dead_letter.source
    ttl = dead_letter.time_to_live
    return ArchiveRow(
        run_id=run_id,
        archived_at=archived_at,
        archived_date=archived_at.astimezone(UTC).strftime("%Y-%m-%d"),
        decision=decision,
        decision_detail=detail,
        source_entity=source.path,
        source_kind=source.kind,
        source_topic=source.topic,
        source_subscription=source.name if source.kind == "subscription" else None,
        target_entity=target_entity,
        message_id=dead_letter.message_id,
        session_id=dead_letter.session_id,
        correlation_id=dead_letter.correlation_id,
        subject=dead_letter.subject,
        content_type=dead_letter.content_type,
        reply_to=dead_letter.reply_to,
        reply_to_session_id=dead_letter.reply_to_session_id,
        to=dead_letter.to,
        partition_key=dead_letter.partition_key,
        time_to_live_ms=None if ttl is None else int(ttl.total_seconds() * 1000),
        body=dead_letter.body,
        application_properties=encode_properties(dead_letter.application_properties),
        contract_type=dead_letter.contract_type,
        sequence_number=dead_letter.sequence_number,
        enqueued_time=dead_letter.enqueued_time,
        delivery_count=dead_letter.delivery_count,
        dead_letter_reason=dead_letter.dead_letter_reason,
        dead_letter_description=dead_letter.dead_letter_description,
        dead_letter_source=dead_letter.dead_letter_source,
        redrive_count=dead_letter.redrive_count,
    )
