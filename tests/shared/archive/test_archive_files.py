"""Archive files: layout, idempotent names, durability and readability by pyarrow and Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from shared.archive.reader import read_archive, read_run_summary, row_properties
from shared.archive.schema import ARCHIVE_SCHEMA
from shared.archive.writer import ArchiveWriter
from tests.shared.archive.archive_support import row


def test_rows_are_written_one_file_per_date_and_entity_partition(tmp_path: Path) -> None:
    writer = ArchiveWriter(str(tmp_path))
    rows = [row(1), row(2), row(3, "events/Subscriptions/billing"), row(4, archived_date="2026-11-23")]

    written = writer.write("run-1", rows)

    layout = sorted(str(Path(f.path).relative_to(tmp_path).parent) for f in written)
    assert layout == [
        "date=2026-11-22/entity=events~Subscriptions~billing",
        "date=2026-11-22/entity=orders",
        "date=2026-11-23/entity=orders",
    ]
    assert all(Path(f.path).name.startswith("run-1-") and f.path.endswith(".parquet") for f in written)
    assert sorted(f.rows for f in written) == [1, 1, 2]
    assert not list(tmp_path.rglob(".*"))  # no temporary files left behind
    table = pq.read_table(next(f.path for f in written if f.rows == 2))
    assert table.schema.equals(ARCHIVE_SCHEMA, check_metadata=False)
    assert table.schema.metadata[b"busbar.archive.schema_version"] == b"1"


def test_writing_the_same_messages_again_in_the_same_run_replaces_the_file_instead_of_duplicating_rows(
    tmp_path: Path,
) -> None:
    writer = ArchiveWriter(str(tmp_path))

    first = writer.write("run-1", [row(1), row(2)])
    again = writer.write("run-1", [row(2), row(1)])
    other = writer.write("run-1", [row(3)])

    assert [f.path for f in first] == [f.path for f in again]
    assert other[0].path != first[0].path
    assert read_archive(str(tmp_path)).num_rows == 3


def test_the_archive_reads_back_with_typed_properties_and_the_run_summary_beside_it(tmp_path: Path) -> None:
    writer = ArchiveWriter(str(tmp_path))
    writer.write("run-1", [row(1), row(2, "events/Subscriptions/billing")])
    writer.write_summary("run-1", {"totals": {"archived": 2}})

    table = read_archive(str(tmp_path))

    assert sorted(table.column("sequence_number").to_pylist()) == [1, 2]
    first = min(table.to_pylist(), key=lambda r: r["sequence_number"])
    assert row_properties(first) == {"tenant": "acme", "n": 1}
    assert first["body"] == b'{"n": 1}'
    assert read_run_summary(str(tmp_path), "run-1") == {"totals": {"archived": 2}}


def test_an_archive_not_written_yet_reads_as_empty(tmp_path: Path) -> None:
    assert read_archive(str(tmp_path / "nothing")).num_rows == 0
