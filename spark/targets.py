"""What the replay needs to know about its targets (on the driver, through the management plane), and the
pure step that holds back what a target would silently drop.

A target with duplicate detection drops a message whose MessageId it saw inside its window, and the
sender cannot tell: the broker accepts the send. A replay that keeps the archived MessageId (the default,
``--message_id_policy preserve``) would then record the row as sent and skip it forever: a silent loss.
So, like the re-drive (:func:`shared.redrive.guards.duplicate_window_end`), the replay works out when the
target last saw each MessageId and holds rows still inside the window: they are reported as ``held``
with the time they become safe, stay unsent in the ledger and are replayed by a later run (or now with
``--message_id_policy derive``, which sends under a new stable MessageId).

When the target last saw a MessageId: when it was enqueued there, for rows dead-lettered in the target
itself (a queue's own dead-letter queue: the failed delivery was that enqueue); no later than the row's
enqueued time, for rows dead-lettered in the target's hold queue (``<queue>.held``: a parked message went
through the endpoint queue, which requires duplicate detection like every endpoint queue, before it was
parked); and when a replay last sent it there (the ledger). A subscription's dead letter never reached its
forward-to queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, StringType, StructField, StructType

from shared.redrive.guards import WINDOW_MARGIN
from shared.topology.names import held_queue

TARGET_SCHEMA = StructType(
    [
        StructField("target_entity", StringType(), False),
        StructField("requires_duplicate_detection", BooleanType(), False),
        StructField("duplicate_window_seconds", DoubleType(), False),
    ]
)


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """A replay target's duplicate detection, as the management plane reports it."""

    name: str
    requires_duplicate_detection: bool
    window: timedelta


def fetch_targets(names: Iterable[str], management: object) -> list[TargetInfo]:
    """Each named queue's or topic's duplicate detection (``management``: a ``ManagementClient``). A name
    that is neither is left out: sending to it fails and is reported as failed, nothing is dropped."""
    from azure.core.exceptions import ResourceNotFoundError

    client = management
    scope = client.scope  # type: ignore[attr-defined]
    found: list[TargetInfo] = []
    for name in sorted(set(names)):
        entity = None
        for operations in (client.queues, client.topics):  # type: ignore[attr-defined]
            try:
                entity = operations.get(*scope, name)
                break
            except ResourceNotFoundError:
                continue
        if entity is None:
            continue
        window = entity.duplicate_detection_history_time_window
        found.append(
            TargetInfo(
                name=name,
                requires_duplicate_detection=bool(entity.requires_duplicate_detection),
                window=window if isinstance(window, timedelta) else timedelta(minutes=10),
            )
        )
    return found


def targets_frame(spark: SparkSession, targets: Iterable[TargetInfo]) -> DataFrame:
    rows = [(t.name, t.requires_duplicate_detection, t.window.total_seconds()) for t in targets]
    return spark.createDataFrame(rows, TARGET_SCHEMA)


def _seconds(column: Column) -> Column:
    return column.cast("double")


def hold_inside_window(
    rows: DataFrame, targets: DataFrame, last_sent: DataFrame, now: datetime, message_id_policy: str
) -> DataFrame:
    """``rows`` with ``held_until``: when a preserved MessageId stops being a duplicate at its target, for
    rows still inside that window (null: safe to send now). Pure.

    ``last_sent``: ``(target_entity, message_id, last_sent_at)`` from the ledger."""
    if message_id_policy == "derive":
        return rows.withColumn("held_until", F.lit(None).cast("timestamp"))
    target, source = F.col("target_entity"), F.col("source_entity")
    seen_here = F.when(
        (target == source) | (F.concat(target, F.lit(held_queue(""))) == source), F.col("enqueued_time")
    )
    last_seen = F.greatest(seen_here, F.col("last_sent_at"))
    safe_from = F.timestamp_seconds(
        _seconds(last_seen) + F.col("duplicate_window_seconds") + F.lit(WINDOW_MARGIN.total_seconds())
    )
    now_literal = F.lit(now.astimezone(UTC).isoformat()).cast("timestamp")
    held = (
        F.col("requires_duplicate_detection")
        & F.col("message_id").isNotNull()
        & last_seen.isNotNull()
        & (safe_from > now_literal)
    )
    joined = rows.join(F.broadcast(targets), "target_entity", "left").join(
        last_sent, ["target_entity", "message_id"], "left"
    )
    return joined.withColumn("held_until", F.when(held, safe_from)).drop(
        "requires_duplicate_detection", "duplicate_window_seconds", "last_sent_at"
    )


def held_reason(target: Column, until: Column) -> Column:
    """The report's text for a held row."""
    return F.concat(
        F.lit("inside the duplicate-detection window of "),
        target,
        F.lit(" until "),
        F.date_format(until, "yyyy-MM-dd'T'HH:mm:ss'Z'"),
        F.lit(": the broker would drop it silently; re-run after then, or with --message_id_policy derive"),
    )
