"""The re-drive's edges of a dead-lettered message: read from Busbar's own AMQP receiver, written to the
archive."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shared.archive.rows import ArchiveRow
from shared.archive.rows import archive_row as envelope_row
from shared.envelope.sdk import body_type, data_body
from shared.envelope.sdk import from_received as envelope_from_received
from shared.redrive.entities import EntityRef
from shared.redrive.message import DeadLetter

if TYPE_CHECKING:
    from shared.amqp.received import ReceivedMessage


def from_received(message: ReceivedMessage, source: EntityRef) -> DeadLetter:
    """A :class:`DeadLetter` from a message of ``source``'s dead-letter queue (only a data body is kept:
    other bodies are never re-sent)."""
    return envelope_from_received(
        message, DeadLetter, body=data_body(message), body_type=body_type(message), source=source
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
    return envelope_row(
        dead_letter,
        run_id=run_id,
        archived_at=archived_at,
        decision=decision,
        decision_detail=detail,
        source_entity=source.path,
        source_kind=source.kind,
        source_topic=source.topic,
        source_subscription=source.name if source.kind == "subscription" else None,
        target_entity=target_entity,
        contract_type=dead_letter.contract_type,
        redrive_count=dead_letter.redrive_count,
    )
