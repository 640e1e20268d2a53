"""One dead-lettered message as the console shows it. Pure.

The body is shown as text, pretty-printed when it is JSON, and cut at :data:`BODY_LIMIT` bytes (the full
size is reported); application properties are split into NServiceBus headers, Busbar's re-drive history
(``busbar.redrive.*``) and the rest; the trace id in ``traceparent`` or ``Diagnostic-Id`` is shown apart
(:func:`shared.telemetry.propagation.trace_of`). A described property (a .NET ``DateTimeOffset``,
``TimeSpan`` or ``Uri``) is shown as its text (:class:`~shared.envelope.properties.Described`), as a .NET
consumer would print it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from shared.envelope.properties import Described
from shared.ops.failures import exception_of
from shared.redrive.message import DEAD_LETTER_PROPERTIES, REDRIVE_PREFIX, DeadLetter
from shared.telemetry.propagation import trace_of

BODY_LIMIT = 64 * 1024
NSERVICEBUS_PREFIX = "NServiceBus."


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Described):
        return str(value)
    return value


def body_view(body: bytes | None, body_type: str) -> dict[str, Any]:
    """The body as text (pretty JSON when it parses), size-capped."""
    if body is None:
        return {"type": body_type, "size": None, "text": None, "json": False, "truncated": False}
    shown = body[:BODY_LIMIT]
    text = shown.decode("utf-8", errors="replace")
    is_json = False
    if len(body) <= BODY_LIMIT:
        try:
            text = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
            is_json = True
        except (ValueError, UnicodeDecodeError):
            pass
    return {
        "type": body_type,
        "size": len(body),
        "text": text,
        "json": is_json,
        "truncated": len(body) > BODY_LIMIT,
    }


def message_view(dead_letter: DeadLetter) -> dict[str, Any]:
    """Everything an operator needs to understand why the message failed."""
    properties = {k: _jsonable(v) for k, v in dead_letter.application_properties.items()}
    headers = {k: v for k, v in properties.items() if k.startswith(NSERVICEBUS_PREFIX)}
    history = {k[len(REDRIVE_PREFIX) :]: v for k, v in properties.items() if k.startswith(REDRIVE_PREFIX)}
    # The broker's own DeadLetterReason / DeadLetterErrorDescription are shown with the system properties.
    other = {
        k: v
        for k, v in properties.items()
        if not k.startswith((NSERVICEBUS_PREFIX, REDRIVE_PREFIX)) and k not in DEAD_LETTER_PROPERTIES
    }
    system = {
        "sequenceNumber": dead_letter.sequence_number,
        "messageId": dead_letter.message_id,
        "correlationId": dead_letter.correlation_id,
        "sessionId": dead_letter.session_id,
        "subject": dead_letter.subject,
        "contentType": dead_letter.content_type,
        "replyTo": dead_letter.reply_to,
        "to": dead_letter.to,
        "partitionKey": dead_letter.partition_key,
        "timeToLiveSeconds": _jsonable(dead_letter.time_to_live),
        "enqueuedTime": _jsonable(dead_letter.enqueued_time),
        "deliveryCount": dead_letter.delivery_count,
        "deadLetterReason": dead_letter.dead_letter_reason,
        "deadLetterErrorDescription": dead_letter.dead_letter_description,
        "deadLetterSource": dead_letter.dead_letter_source,
    }
    return {
        "entity": dead_letter.source.path,
        "sequenceNumber": dead_letter.sequence_number,
        "exception": exception_of(dead_letter.dead_letter_description, dead_letter.application_properties),
        "body": body_view(dead_letter.body, dead_letter.body_type),
        "system": system,
        "nservicebusHeaders": headers,
        "redriveHistory": history,
        "applicationProperties": other,
        # The trace it belongs to (its traceparent / Diagnostic-Id), so a failure leads to its trace.
        "trace": trace_of(dead_letter.application_properties),
    }
