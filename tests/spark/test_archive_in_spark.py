"""The failure archive as the replay job's Spark reads it: partitions as columns, every column typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.archive.reader import row_properties
from shared.archive.schema import ARCHIVE_SCHEMA
from shared.archive.writer import ArchiveWriter
from tests.shared.archive.archive_support import row


def test_spark_reads_the_archive_with_its_partitions_and_every_column(tmp_path: Path, spark: Any) -> None:
    writer = ArchiveWriter(str(tmp_path))
    writer.write("run-1", [row(1), row(2), row(3, "events/Subscriptions/billing")])
    writer.write_summary("run-1", {"totals": {"archived": 3}})

    frame = spark.read.parquet(str(tmp_path))

    assert set(ARCHIVE_SCHEMA.names) | {"date", "entity"} == set(frame.columns)
    rows = sorted(frame.collect(), key=lambda r: r["sequence_number"])
    assert [r["sequence_number"] for r in rows] == [1, 2, 3]
    assert [r["entity"] for r in rows] == ["orders", "orders", "events~Subscriptions~billing"]
    assert rows[0]["body"] == bytearray(b'{"n": 1}')
    assert rows[0]["archived_at"].isoformat().startswith("2026-11-22T12:30")
    assert str(rows[0]["date"]) == "2026-11-22"
    assert rows[2]["source_subscription"] == "billing"
    assert row_properties(rows[0].asDict()) == {"tenant": "acme", "n": 1}
