"""One Service Bus message, independent of any SDK: :class:`Envelope`, and the rules every copy obeys.

A message is received by a trigger (:class:`shared.messages.IncomingMessage`), from a dead-letter queue
(:class:`shared.redrive.message.DeadLetter`), or read back from the failure archive; it is sent again as a
bridged, re-driven or replayed copy. All of them are an :class:`Envelope`: the same body, system properties
and application properties, and the broker's stamps when it was received. Converting goes through one
module per representation: :mod:`shared.envelope.sdk` (azure-servicebus messages) and
:mod:`shared.archive.rows` (archive rows). Pure: no azure imports here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.envelope.properties import as_text


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """A message's body, system properties and application properties, plus the broker's stamps
    (sequence number, enqueued time, delivery count, dead-letter reason) when it was received."""

    body: bytes | None = b""
    message_id: str | None = None
    content_type: str | None = None
    correlation_id: str | None = None
    session_id: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    to: str | None = None
    partition_key: str | None = None
    time_to_live: timedelta | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    sequence_number: int | None = None
    enqueued_time: datetime | None = None
    delivery_count: int | None = None
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None
    dead_letter_source: str | None = None


class PartitionKeyPolicy(StrEnum):
    """What a copy does when its PartitionKey differs from its SessionId (Service Bus requires them equal
    when both are set, and the azure-servicebus SDK refuses to build such a message)."""

    SESSION_WINS = "session-wins"
    """Send with PartitionKey = SessionId: the broker placed the original by its session, so the copy goes
    where the original went. Re-driven and bridged copies, which must keep the original's placement."""

    REFUSE = "refuse"
    """Raise :class:`PartitionKeyConflict`: the replay reports a row it cannot send as archived instead of
    altering it (an operator chose to replay exactly what was archived)."""


class PartitionKeyConflict(ValueError):
    """The partition_key differs from the session_id, and the policy is :attr:`PartitionKeyPolicy.REFUSE`."""


def copy_partition_key(envelope: Envelope, policy: PartitionKeyPolicy) -> str | None:
    """The PartitionKey a copy of ``envelope`` is sent with: the original's, unless it conflicts with the
    SessionId (then ``policy`` decides). Without a SessionId the original's PartitionKey is kept."""
    partition_key, session_id = envelope.partition_key, envelope.session_id
    if session_id is None or partition_key is None or partition_key == session_id:
        return partition_key
    if policy is PartitionKeyPolicy.SESSION_WINS:
        return session_id
    raise PartitionKeyConflict(
        f"partition_key {partition_key!r} differs from session_id {session_id!r}: Service Bus requires them "
        "to be equal"
    )


__all__ = ["Envelope", "PartitionKeyConflict", "PartitionKeyPolicy", "as_text", "copy_partition_key"]
