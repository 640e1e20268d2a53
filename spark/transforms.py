"""The replay's pure ``DataFrame -> DataFrame`` steps: select, dedupe, resolve targets, order for sending.

No I/O here: the inputs are archive rows (:data:`shared.archive.schema.ARCHIVE_SCHEMA`), the outputs are
the rows to send (or report), so each step is tested on a local SparkSession with small in-memory frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.params import Selection

UNROUTABLE_NO_TARGET = (
    "no target: a subscription-sourced row without target_entity (pass --target_overrides source=target)"
)


def _instant(moment: datetime) -> Column:
    """``moment`` as a Spark timestamp, independent of the driver's and the session's time zone (the cast
    of an ISO-8601 string with an explicit offset is exact; a naive Python datetime is not)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return F.lit(aware.astimezone(UTC).isoformat()).cast("timestamp")


def select_rows(archive: DataFrame, selection: Selection) -> DataFrame:
    """The archive rows matching every criterion of ``selection`` that is set.

    The time range is half-open ``[from_time, to_time)`` on ``selection.time_column``; when that is
    ``archived_at`` and the frame has the ``date`` partition column, the range also prunes partitions."""
    df = archive
    column = F.col(selection.time_column)
    prune = selection.time_column == "archived_at" and "date" in archive.columns
    if selection.from_time is not None:
        df = df.filter(column >= _instant(selection.from_time))
        if prune:
            df = df.filter(F.col("date") >= F.lit(f"{selection.from_time.astimezone(UTC):%Y-%m-%d}"))
    if selection.to_time is not None:
        df = df.filter(column < _instant(selection.to_time))
        if prune:
            df = df.filter(F.col("date") <= F.lit(f"{selection.to_time.astimezone(UTC):%Y-%m-%d}"))
    criteria: Sequence[tuple[str, tuple[str, ...]]] = (
        ("source_entity", selection.source_entities),
        ("dead_letter_reason", selection.reasons),
        ("contract_type", selection.contract_types),
        ("message_id", selection.message_ids),
        ("run_id", selection.run_ids),
    )
    for name, values in criteria:
        if values:
            df = df.filter(F.col(name).isin(list(values)))
    return df


def message_key() -> Column:
    """The identity of an archived *message*: ``source_entity|message_id``, or
    ``source_entity|#run_id:sequence_number`` when the message had no MessageId."""
    fallback = F.concat(F.lit("#"), F.col("run_id"), F.lit(":"), F.col("sequence_number").cast("string"))
    return F.concat_ws("|", F.col("source_entity"), F.coalesce(F.col("message_id"), fallback))


def replay_key() -> Column:
    """The identity of an archived *failure* (the ledger's key): the dead-lettered message's source
    entity, sequence number and enqueued time. Each failure is replayed at most once; the same message
    failing again later is a new failure with a new key (its new delivery has a new sequence number), so it
    can be replayed again. A row without a sequence number (a router's archive) falls back to its run and
    archive time; the same failure archived twice (a crash between archive and complete) keeps one key."""
    sequence = F.coalesce(
        F.col("sequence_number").cast("string"),
        F.concat(
            F.lit("#"), F.col("run_id"), F.lit("@"), F.date_format("archived_at", "yyyyMMddHHmmssSSSSSS")
        ),
    )
    enqueued = F.coalesce(F.date_format("enqueued_time", "yyyyMMddHHmmssSSSSSS"), F.lit("-"))
    return F.concat_ws("|", F.col("source_entity"), sequence, enqueued)


def dedupe_latest(rows: DataFrame) -> DataFrame:
    """One row per message identity (adds ``replay_key``, the failure's key): the latest failure wins.

    A message that was re-driven, failed again and was archived again appears once per failure; only the
    newest (latest ``archived_at``, then highest ``redrive_count``, then run id) is replayed, so a run
    never sends one message twice, and once that failure is sent the older ones are never chosen again."""
    keyed = rows.withColumn("replay_key", replay_key())
    newest_first = Window.partitionBy(message_key()).orderBy(
        F.col("archived_at").desc(),
        F.col("redrive_count").desc(),
        F.col("run_id").desc(),
        F.col("sequence_number").desc_nulls_last(),
    )
    return keyed.withColumn("_rank", F.row_number().over(newest_first)).filter("_rank = 1").drop("_rank")


def resolve_targets(rows: DataFrame, overrides: Sequence[tuple[str, str]] = ()) -> DataFrame:
    """Replace ``target_entity`` by where each row goes and add ``unroutable`` (why not, else null).

    Precedence: a ``source=target`` override; the archived ``target_entity`` (a subscription's forward-to
    queue, as the re-drive recorded it); the source itself for queue- and topic-sourced rows. A
    subscription-sourced row with none of these is unroutable: it is reported, never sent to the topic
    (that would fan out to every subscriber)."""
    resolved: Column = F.col("target_entity")
    if overrides:
        override: Column | None = None
        for source, destination in overrides:
            condition = F.col("source_entity") == F.lit(source)
            override = (
                F.when(condition, F.lit(destination))
                if override is None
                else override.when(condition, F.lit(destination))
            )
        assert override is not None
        resolved = F.coalesce(override, resolved)
    own = F.when(F.col("source_kind").isin("queue", "topic"), F.col("source_entity"))
    target = F.coalesce(resolved, own)
    return rows.withColumn("target_entity", target).withColumn(
        "unroutable", F.when(target.isNull(), F.lit(UNROUTABLE_NO_TARGET))
    )


def order_for_sending(rows: DataFrame, partitions: int) -> DataFrame:
    """Spread rows over ``partitions`` send tasks so a session stays in one task, in original order.

    Rows of one (target, session) share a partition; within a partition rows are sorted by target, then
    session, then original sequence number, so each task sends per-target runs and each session in order.
    Rows without a session spread by their identity."""
    order_key = F.when(
        F.col("session_id").isNotNull(), F.concat_ws("|", F.col("target_entity"), F.col("session_id"))
    ).otherwise(F.col("replay_key"))
    return rows.repartition(partitions, order_key).sortWithinPartitions(
        "target_entity", "session_id", "sequence_number", "replay_key"
    )


def plan_summary(plan: DataFrame) -> DataFrame:
    """Counts of planned rows per target, source, dead-letter reason and contract type."""
    return (
        plan.groupBy("target_entity", "source_entity", "dead_letter_reason", "contract_type")
        .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("body_bytes"))
        .orderBy("target_entity", "source_entity", "dead_letter_reason", "contract_type")
    )
