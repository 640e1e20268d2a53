"""The replay report: one row per message (outcome, error, target, timestamps) and a run summary.

Layout: ``<report>/<replay_run_id>/results/`` (Parquet, one row per selected message),
``<report>/<replay_run_id>/plan/`` (dry runs: what would be sent where) and
``<report>/<replay_run_id>/summary.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from spark.columns import REPORTED
from spark.filesystem import url_to_fs

ALREADY_SENT_OUTCOME = "already_sent"
HELD_OUTCOME = "held"  # inside the target's duplicate-detection window: not sent, replayed by a later run
UNROUTABLE_OUTCOME = "unroutable"
PLANNED_OUTCOME = "planned"

RESULT_SCHEMA = StructType(
    [
        StructField("replay_run_id", StringType(), False),
        # message_id: as sent (see --message_id_policy)
        *(
            StructField(name, LongType() if name == "sequence_number" else StringType(), name != "replay_key")
            for name in REPORTED
        ),
        StructField("outcome", StringType(), False),  # sent|failed|invalid|already_sent|unroutable|planned
        StructField("error", StringType(), True),
        StructField("attempts", IntegerType(), True),
        StructField("planned_at", TimestampType(), True),
        StructField("sent_at", TimestampType(), True),
    ]
)
"""One row per selected message."""

RESULT_COLUMNS = tuple(f.name for f in RESULT_SCHEMA.fields)


def run_directory(report_path: str, replay_run_id: str) -> str:
    """Where one run's report goes."""
    return f"{report_path.rstrip('/')}/{replay_run_id}"


def result_rows(
    rows: DataFrame, replay_run_id: str, outcome: str, error: Any, planned_at: datetime
) -> DataFrame:
    """Report rows for plan rows that are not sent (already sent, unroutable, or planned in a dry run)."""
    return rows.select(
        F.lit(replay_run_id).alias("replay_run_id"),
        *REPORTED,
        F.lit(outcome).alias("outcome"),
        (error if error is not None else F.lit(None)).cast("string").alias("error"),
        F.lit(None).cast("int").alias("attempts"),
        F.lit(planned_at.astimezone(UTC).isoformat()).cast("timestamp").alias("planned_at"),
        F.lit(None).cast("timestamp").alias("sent_at"),
    )


@dataclass
class ReplaySummary:
    """What a run did, printed at the end and written as ``summary.json``."""

    replay_run_id: str
    dry_run: bool
    selected: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    by_target: dict[str, dict[str, int]] = field(default_factory=dict)
    plan: list[dict[str, Any]] = field(default_factory=list)  # counts per target/source/reason/type
    send_seconds: float | None = None  # wall time of the send phase (the Spark action that sends)
    job_seconds: float | None = None  # wall time after the SparkSession was ready
    messages_per_second: float | None = None
    estimated_seconds_at_rate_limit: float | None = None
    error_samples: list[dict[str, str]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    # Per target without duplicate detection: how many messages a crash could deliver twice (the unrecorded
    # last batch of every running task; a re-run resends only what the ledger does not confirm).
    crash_repeat_bound: dict[str, int] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return self.outcomes.get(outcome, 0)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str, sort_keys=True)

    def render(self) -> str:
        """The human summary printed at the end of a run."""
        mode = "DRY RUN (nothing sent)" if self.dry_run else "replay"
        lines = [f"[replay] {mode} {self.replay_run_id}: {self.selected} selected"]
        for outcome, count in sorted(self.outcomes.items()):
            lines.append(f"[replay]   {outcome:>13}: {count}")
        for target, counts in sorted(self.by_target.items()):
            lines.append(
                f"[replay]   -> {target}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            )
        if self.messages_per_second is not None:
            lines.append(
                f"[replay]   send phase {self.send_seconds:.1f} s, {self.messages_per_second:.0f} msg/s"
            )
        if self.estimated_seconds_at_rate_limit is not None:
            lines.append(
                f"[replay]   estimated time at the rate limit: {self.estimated_seconds_at_rate_limit:.0f} s"
            )
        for target, bound in sorted(self.crash_repeat_bound.items()):
            lines.append(
                f"[replay]   -> {target} has no duplicate detection: a crash mid-send can deliver up to "
                f"{bound} messages twice (one unconfirmed batch per task)"
            )
        held = self.count(HELD_OUTCOME)
        if held:
            lines.append(
                f"[replay]   {held} held: inside their target's duplicate-detection window (see the "
                "results); nothing was dropped, a later run sends them"
            )
        for sample in self.error_samples:
            lines.append(f"[replay]   error sample {sample['replay_key']}: {sample['error']}")
        return "\n".join(lines)


def summarize(results: DataFrame, summary: ReplaySummary) -> ReplaySummary:
    """Fill ``summary``'s counts and one error sample per (target, outcome) from the written results (one
    small aggregation)."""
    sample = F.when(F.col("error").isNotNull(), F.struct("replay_key", "error"))
    groups = (
        results.groupBy("target_entity", "outcome")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.first(sample, ignorenulls=True).alias("sample"),
        )
        .collect()
    )
    for row in groups:
        target = row["target_entity"] or "(none)"
        summary.outcomes[row["outcome"]] = summary.outcomes.get(row["outcome"], 0) + int(row["count"])
        summary.by_target.setdefault(target, {})[row["outcome"]] = int(row["count"])
        if row["sample"] is not None:
            summary.error_samples.append(
                {"replay_key": row["sample"]["replay_key"], "error": row["sample"]["error"]}
            )
    summary.selected = sum(summary.outcomes.values())
    return summary


def write_summary(report_path: str, summary: ReplaySummary) -> str:
    """Write ``summary.json`` for the run; returns its path."""
    path = f"{run_directory(report_path, summary.replay_run_id)}/summary.json"
    fs, local = url_to_fs(path)
    fs.makedirs(local.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(local, "w") as handle:
        handle.write(summary.to_json())
    return path
