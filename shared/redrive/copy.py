"""Build the re-driven copy of a dead-lettered message.

The copy keeps the body byte for byte and every system property a receiver or a filter may look at
(MessageId, SessionId, PartitionKey, CorrelationId, Subject, ContentType, To, ReplyTo,
ReplyToSessionId, TimeToLive) and every application property, except ``DeadLetterReason`` and
``DeadLetterErrorDescription``: those describe the previous failure, so they move into namespaced
properties instead of confusing the next handler (ServiceBusExplorer #344, #79)::

    busbar.redrive.count                 1, 2, ... (loop protection reads it back)
    busbar.redrive.reason                the dead-letter reason
    busbar.redrive.description           the dead-letter description (truncated to 1,024 characters)
    busbar.redrive.source                the entity whose dead-letter queue it came from
    busbar.redrive.dead_letter_source    the broker's DeadLetterSource, when it was auto-forwarded
    busbar.redrive.sequence_number       its sequence number in that dead-letter queue
    busbar.redrive.run_id                the run that re-drove it
    busbar.redrive.at                    when (a timestamp)

Every property keeps the AMQP type it arrived with (:mod:`shared.envelope.properties`; the re-drive's
receivers read each one typed and its sender sends each one typed: :mod:`shared.amqp`, docs/operations.md).
A property no AMQP type fits makes the message uncopyable, with the property's name and the reason.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.envelope import PartitionKeyPolicy
from shared.envelope.properties import Int, Long, PropertyTypeError
from shared.redrive.message import DEAD_LETTER_PROPERTIES, REDRIVE_COUNT, REDRIVE_PREFIX, DeadLetter
from shared.telemetry.operations import linked, trace_stamped

if TYPE_CHECKING:
    from shared.amqp.outgoing import OutgoingMessage

DESCRIPTION_LIMIT = 1024
"""Characters of the dead-letter description kept on the copy (the archive keeps all of it)."""


class CopyError(ValueError):
    """The message cannot be re-sent faithfully (the reason says why)."""


def redrive_properties(dead_letter: DeadLetter, run_id: str, now: datetime) -> dict[str, Any]:
    """The copy's application properties: the original ones, DLQ metadata moved to ``busbar.redrive.*``."""
    properties: dict[str, Any] = {}
    for name, value in dead_letter.application_properties.items():
        if name in DEAD_LETTER_PROPERTIES or name.startswith(REDRIVE_PREFIX):
            continue
        properties[name] = value
    history: dict[str, Any] = {
        REDRIVE_COUNT: Int(dead_letter.redrive_count + 1),
        f"{REDRIVE_PREFIX}reason": dead_letter.dead_letter_reason or "",
        f"{REDRIVE_PREFIX}description": (dead_letter.dead_letter_description or "")[:DESCRIPTION_LIMIT],
        f"{REDRIVE_PREFIX}source": dead_letter.source.path,
        f"{REDRIVE_PREFIX}sequence_number": Long(dead_letter.sequence_number),
        f"{REDRIVE_PREFIX}run_id": run_id,
        f"{REDRIVE_PREFIX}at": now,
    }
    if dead_letter.dead_letter_source:
        history[f"{REDRIVE_PREFIX}dead_letter_source"] = dead_letter.dead_letter_source
    properties.update(history)
    return properties


def build_redrive_message(dead_letter: DeadLetter, run_id: str, now: datetime) -> OutgoingMessage:
    """The message to send to the target in place of ``dead_letter``."""
    # Imported here: proton loads its C library only when a run sends (indexing the app never does).
    from shared.amqp.outgoing import outgoing_message

    if dead_letter.body is None:
        raise CopyError(f"{dead_letter.body_type} bodies are not re-driven (only AMQP data bodies)")
    # The copy goes where the original went: a PartitionKey that conflicts with the SessionId yields to it.
    copy = replace(dead_letter, application_properties=redrive_properties(dead_letter, run_id, now))
    try:
        message = outgoing_message(copy, PartitionKeyPolicy.SESSION_WINS)
    except PropertyTypeError as error:
        raise CopyError(str(error)) from None
    # The copy starts a new trace, linked to the original's (shared.telemetry.operations: why linked).
    reason = dead_letter.dead_letter_reason or ""
    with linked(
        "redrive",
        dead_letter.application_properties,
        destination=dead_letter.source.path,
        attributes={f"{REDRIVE_PREFIX}reason": reason, f"{REDRIVE_PREFIX}run_id": run_id},
    ):
        return replace(message, application_properties=trace_stamped(message.application_properties))


def oversize(message: OutgoingMessage, max_message_size_bytes: int) -> bool:
    """True when ``message``, encoded, is larger than the target's maximum message size (the size the
    sender checks against the link's, and Service Bus against the entity's: it is archived, never lost)."""
    return len(message.encoded()) > max_message_size_bytes
