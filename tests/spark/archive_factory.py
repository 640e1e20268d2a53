"""Build archive rows and archives for the replay tests, written with the re-drive's own
:class:`shared.archive.writer.ArchiveWriter` (same files, same layout as a real re-drive run)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.archive.properties import encode_properties
from shared.archive.rows import ArchiveRow
from shared.archive.writer import ArchiveWriter

BASE_TIME = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_GENERATED = "<generated>"


def archive_row(
    *,
    source_entity: str = "orders",
    message_id: str | None = _GENERATED,
    sequence_number: int = 1,
    archived_at: datetime = BASE_TIME,
    properties: Mapping[str, Any] | None = None,
    **fields: Any,
) -> ArchiveRow:
    """One archive row with plausible defaults (a fresh MessageId unless ``message_id`` is given, None
    included); ``fields`` override any ArchiveRow field."""
    kind = "subscription" if "/Subscriptions/" in source_entity else "queue"
    topic, _, subscription = source_entity.partition("/Subscriptions/")
    row = ArchiveRow(
        run_id="redrive-run-1",
        archived_at=archived_at,
        archived_date=f"{archived_at:%Y-%m-%d}",
        decision="archive",
        decision_detail=None,
        source_entity=source_entity,
        source_kind=kind,
        source_topic=topic if kind == "subscription" else None,
        source_subscription=subscription if kind == "subscription" else None,
        target_entity=None,
        message_id=f"m-{uuid.uuid4().hex[:12]}" if message_id == _GENERATED else message_id,
        session_id=None,
        correlation_id=None,
        subject=None,
        content_type="application/json",
        reply_to=None,
        reply_to_session_id=None,
        to=None,
        partition_key=None,
        time_to_live_ms=None,
        body=f'{{"n": {sequence_number}}}'.encode(),
        application_properties=encode_properties(properties or {}),
        contract_type="Sales.OrderPlaced",
        sequence_number=sequence_number,
        enqueued_time=archived_at - timedelta(minutes=5),
        delivery_count=10,
        dead_letter_reason="MaxDeliveryCountExceeded",
        dead_letter_description="too many deliveries",
        dead_letter_source=None,
        redrive_count=0,
    )
    return replace(row, **fields)


def write_archive(root: Path, rows: Sequence[ArchiveRow], run_id: str = "redrive-run-1") -> Path:
    """Write ``rows`` as a re-drive run would; returns ``root``."""
    ArchiveWriter(str(root)).write(run_id, rows)
    return root


def as_records(rows: Sequence[ArchiveRow]) -> list[dict[str, Any]]:
    """Rows as dicts in ARCHIVE_SCHEMA order (for ``spark.createDataFrame``)."""
    return [asdict(row) for row in rows]
