"""Archive rows for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.archive.properties import encode_properties
from shared.archive.rows import ArchiveRow

ARCHIVED_AT = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)


def row(sequence_number: int, source_entity: str = "orders", **fields: Any) -> ArchiveRow:
    values: dict[str, Any] = {
        "run_id": "run-1",
        "archived_at": ARCHIVED_AT,
        "archived_date": "2026-11-22",
        "decision": "archive",
        "decision_detail": "reason ValidationFailed",
        "source_entity": source_entity,
        "source_kind": "subscription" if "/" in source_entity else "queue",
        "source_topic": source_entity.split("/")[0] if "/" in source_entity else None,
        "source_subscription": source_entity.split("/")[-1] if "/" in source_entity else None,
        "target_entity": "orders",
        "message_id": f"m-{sequence_number}",
        "session_id": None,
        "correlation_id": "c-1",
        "subject": "OrderPlaced",
        "content_type": "application/json",
        "reply_to": None,
        "reply_to_session_id": None,
        "to": None,
        "partition_key": None,
        "time_to_live_ms": 60_000,
        "body": b'{"n": %d}' % sequence_number,
        "application_properties": encode_properties({"tenant": "acme", "n": sequence_number}),
        "contract_type": "Sales.OrderPlaced",
        "sequence_number": sequence_number,
        "enqueued_time": ARCHIVED_AT - timedelta(hours=1),
        "delivery_count": 10,
        "dead_letter_reason": "ValidationFailed",
        "dead_letter_description": "bad",
        "dead_letter_source": None,
        "redrive_count": 0,
    }
    values.update(fields)
    return ArchiveRow(**values)
