"""The failure archive's row, :class:`ArchiveRow`, and :class:`~shared.envelope.Envelope` <-> row: the one
mapping between a message and its row in the archive (the re-drive's and the router's rows, the replay's
reading of them). Pure: the Parquet I/O is :mod:`shared.archive.writer`'s."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.archive.properties import decode_properties, encode_properties
from shared.envelope import Envelope


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    """One archived message: the fields of :data:`shared.archive.schema.ARCHIVE_SCHEMA`, in its order."""

    run_id: str
    archived_at: datetime
    archived_date: str
    decision: str
    decision_detail: str | None
    source_entity: str
    source_kind: str
    source_topic: str | None
    source_subscription: str | None
    target_entity: str | None
    message_id: str | None
    session_id: str | None
    correlation_id: str | None
    subject: str | None
    content_type: str | None
    reply_to: str | None
    reply_to_session_id: str | None
    to: str | None
    partition_key: str | None
    time_to_live_ms: int | None
    body: bytes | None
    application_properties: str | None
    contract_type: str | None
    sequence_number: int | None
    enqueued_time: datetime | None
    delivery_count: int | None
    dead_letter_reason: str | None
    dead_letter_description: str | None
    dead_letter_source: str | None
    redrive_count: int


MAX_TIME_TO_LIVE_MS = 2**32 - 1
"""The AMQP header's ttl is a uint: a longer archived TimeToLive means "the entity's default"."""


def time_to_live_ms(ttl: timedelta | None) -> int | None:
    """A TimeToLive as the archive's milliseconds."""
    return None if ttl is None else int(ttl.total_seconds() * 1000)


def time_to_live(ms: int | None) -> timedelta | None:
    """The archive's milliseconds as a TimeToLive to send: None (the entity's default) when unset, not
    positive, or beyond what AMQP can carry."""
    return timedelta(milliseconds=ms) if ms is not None and 0 < ms <= MAX_TIME_TO_LIVE_MS else None


def archive_row(
    envelope: Envelope,
    *,
    run_id: str,
    archived_at: datetime,
    decision: str,
    decision_detail: str | None,
    source_entity: str,
    source_kind: str,
    source_topic: str | None,
    source_subscription: str | None,
    target_entity: str | None,
    contract_type: str | None,
    redrive_count: int,
) -> ArchiveRow:
    """The archive row of ``envelope``: every property it carries, nothing dropped, plus where it came
    from and what was decided (``archived_date`` is ``archived_at``'s UTC date: the partition)."""
    return ArchiveRow(
        run_id=run_id,
        archived_at=archived_at,
        archived_date=archived_at.astimezone(UTC).strftime("%Y-%m-%d"),
        decision=decision,
        decision_detail=decision_detail,
        source_entity=source_entity,
        source_kind=source_kind,
        source_topic=source_topic,
        source_subscription=source_subscription,
        target_entity=target_entity,
        message_id=envelope.message_id,
        session_id=envelope.session_id,
        correlation_id=envelope.correlation_id,
        subject=envelope.subject,
        content_type=envelope.content_type,
        reply_to=envelope.reply_to,
        reply_to_session_id=envelope.reply_to_session_id,
        to=envelope.to,
        partition_key=envelope.partition_key,
        time_to_live_ms=time_to_live_ms(envelope.time_to_live),
        body=envelope.body,
        application_properties=encode_properties(envelope.application_properties),
        contract_type=contract_type,
        sequence_number=envelope.sequence_number,
        enqueued_time=envelope.enqueued_time,
        delivery_count=envelope.delivery_count,
        dead_letter_reason=envelope.dead_letter_reason,
        dead_letter_description=envelope.dead_letter_description,
        dead_letter_source=envelope.dead_letter_source,
        redrive_count=redrive_count,
    )


def envelope_from_row(row: Any) -> Envelope:
    """The message an archive row holds: ``row`` is an :class:`ArchiveRow` or anything with its message
    columns as attributes (a Spark ``Row`` of the replay's plan). Raises
    :class:`~shared.archive.properties.PropertyCodecError` for application properties that are not the
    archive's typed JSON. The broker's stamps other than the dead-letter reason are not read: a copy is
    sent without them."""
    return Envelope(
        body=bytes(row.body) if row.body is not None else None,
        message_id=row.message_id,
        content_type=row.content_type,
        correlation_id=row.correlation_id,
        session_id=row.session_id,
        subject=row.subject,
        reply_to=row.reply_to,
        reply_to_session_id=row.reply_to_session_id,
        to=row.to,
        partition_key=row.partition_key,
        time_to_live=time_to_live(row.time_to_live_ms),
        application_properties=decode_properties(row.application_properties),
        dead_letter_reason=row.dead_letter_reason,
    )
