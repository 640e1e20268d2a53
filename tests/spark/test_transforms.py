"""The replay's pure DataFrame transforms: selection, dedupe, target resolution, send order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from spark.params import Selection
from spark.transforms import (
    UNROUTABLE_NO_TARGET,
    dedupe_latest,
    order_for_sending,
    resolve_targets,
    select_rows,
)
from tests.spark.archive_factory import BASE_TIME, archive_row

SUB = "sales/Subscriptions/billing"

ROWS = [
    archive_row(message_id="a", source_entity="orders", sequence_number=1),
    archive_row(
        message_id="b",
        source_entity="orders",
        sequence_number=2,
        archived_at=BASE_TIME + timedelta(days=1),
        dead_letter_reason="TTLExpiredException",
    ),
    archive_row(message_id="c", source_entity=SUB, sequence_number=3, target_entity="billing-redrive"),
    archive_row(
        message_id="d",
        source_entity="payments",
        sequence_number=4,
        contract_type="Payments.Charged",
        run_id="redrive-run-2",
        archived_at=BASE_TIME + timedelta(days=2),
    ),
]


def _ids(df: Any) -> Any:
    return df.select("message_id")


def test_each_selection_criterion_keeps_only_matching_rows(spark: Any, frame: Any) -> None:
    archive = frame(ROWS)
    cases = {
        Selection(): ["a", "b", "c", "d"],
        Selection(from_time=BASE_TIME + timedelta(hours=1)): ["b", "d"],
        Selection(to_time=BASE_TIME + timedelta(days=2)): ["a", "b", "c"],
        Selection(from_time=BASE_TIME + timedelta(days=1), to_time=BASE_TIME + timedelta(days=2)): ["b"],
        Selection(time_column="enqueued_time", to_time=BASE_TIME): ["a", "c"],
        Selection(source_entities=("orders", SUB)): ["a", "b", "c"],
        Selection(reasons=("TTLExpiredException",)): ["b"],
        Selection(contract_types=("Payments.Charged",)): ["d"],
        Selection(message_ids=("a", "d", "zzz")): ["a", "d"],
        Selection(run_ids=("redrive-run-2",)): ["d"],
        Selection(source_entities=("orders",), reasons=("MaxDeliveryCountExceeded",)): ["a"],
    }
    for selection, expected in cases.items():
        expected_df = spark.createDataFrame([(m,) for m in expected], "message_id string")
        assertDataFrameEqual(_ids(select_rows(archive, selection)), expected_df)


def test_dedupe_keeps_the_latest_archived_copy_of_each_message_per_source_entity(
    spark: Any, frame: Any
) -> None:
    rows = [
        archive_row(message_id="x", sequence_number=1, redrive_count=0, run_id="r1"),
        # the same message archived again after a later re-drive: this copy wins
        archive_row(
            message_id="x",
            sequence_number=9,
            redrive_count=1,
            run_id="r2",
            archived_at=BASE_TIME + timedelta(hours=1),
        ),
        # the same MessageId from another entity is another message
        archive_row(message_id="x", source_entity="payments", sequence_number=5),
        # no MessageId: identified by run and sequence number
        archive_row(message_id=None, sequence_number=7, run_id="r1"),
        archive_row(message_id=None, sequence_number=8, run_id="r1"),
    ]
    result = dedupe_latest(frame(rows)).select("replay_key", "sequence_number", "run_id")
    # The key is the archived failure's: source entity, sequence number, enqueued time.
    enqueued = f"{BASE_TIME - timedelta(minutes=5):%Y%m%d%H%M%S}000000"
    later = f"{BASE_TIME + timedelta(minutes=55):%Y%m%d%H%M%S}000000"
    expected = spark.createDataFrame(
        [
            (f"orders|9|{later}", 9, "r2"),
            (f"payments|5|{enqueued}", 5, "redrive-run-1"),
            (f"orders|7|{enqueued}", 7, "r1"),
            (f"orders|8|{enqueued}", 8, "r1"),
        ],
        "replay_key string, sequence_number long, run_id string",
    )
    assertDataFrameEqual(result, expected)


def test_targets_come_from_overrides_then_the_archive_then_the_source_queue(spark: Any, frame: Any) -> None:
    rows = [
        archive_row(message_id="q", source_entity="orders"),
        archive_row(message_id="s", source_entity=SUB, target_entity="billing-redrive"),
        archive_row(message_id="lost", source_entity="sales/Subscriptions/audit"),
        archive_row(message_id="o", source_entity="payments"),
    ]
    result = resolve_targets(dedupe_latest(frame(rows)), [("payments", "payments-v2")])
    expected = spark.createDataFrame(
        [
            ("q", "orders", None),
            ("s", "billing-redrive", None),
            ("lost", None, UNROUTABLE_NO_TARGET),
            ("o", "payments-v2", None),
        ],
        "message_id string, target_entity string, unroutable string",
    )
    assertDataFrameEqual(result.select("message_id", "target_entity", "unroutable"), expected)


def test_send_order_keeps_each_session_in_one_partition_sorted_by_sequence_number(
    spark: Any, frame: Any
) -> None:
    # Sessions interleaved and shuffled in the archive; one row without a session per target.
    rows = [
        archive_row(message_id=f"{session}-{seq}", session_id=session, sequence_number=seq)
        for seq in (5, 3, 9, 1, 7, 2, 8, 4, 6)
        for session in ("s1", "s2", "s3", "s4", "s5")
    ] + [archive_row(message_id="loose", sequence_number=100)]
    ordered = order_for_sending(resolve_targets(dedupe_latest(frame(rows))), 3)
    assert ordered.rdd.getNumPartitions() == 3
    partitions = ordered.select("session_id", "sequence_number").rdd.glom().collect()
    seen: dict[str | None, int] = {}
    for index, partition in enumerate(partitions):
        for session, _ in partition:
            assert seen.setdefault(session, index) == index, f"session {session} spans partitions"
        for session in {row[0] for row in partition}:
            sequence = [row[1] for row in partition if row[0] == session]
            assert sequence == sorted(sequence)
    assert {s for s in seen if s} == {"s1", "s2", "s3", "s4", "s5"}
    assert sum(len(p) for p in partitions) == len(rows)
    assert ordered.filter(F.col("session_id").isNull()).count() == 1
