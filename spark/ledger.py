"""The replay ledger: a Parquet table of what each replay run planned and what it sent.

Layout: ``<ledger>/replay_run_id=<id>/`` holds

* ``part-*.parquet``: the run's ``planned`` rows, written by Spark before anything is sent;
* ``outcome-p<partition>-a<attempt>-b<batch>-s<sent>-f<failed>.parquet``: one file per sent (or finally
  failed) batch, written by the executor right after the broker acknowledged the batch and before the next
  batch is built. Each file is written under a hidden temporary name and renamed, so a reader (and a re-run)
  sees whole files only; the counts in the name let the driver show progress without reading them.

A re-run anti-joins its plan against every ``sent`` row of every run; a retried task skips the rows its
partition's earlier attempts recorded as sent. See :mod:`spark.replay` for the exact guarantee.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from spark.columns import IDENTITY
from spark.filesystem import url_to_fs

PLANNED, SENT, FAILED = "planned", "sent", "failed"

LEDGER_SCHEMA = pa.schema(
    [
        *(
            pa.field(
                name,
                pa.int64() if name == "sequence_number" else pa.string(),
                nullable=name != "replay_key",
            )
            for name in IDENTITY
        ),
        pa.field("status", pa.string(), nullable=False),  # planned | sent | failed
        pa.field("error", pa.string()),
        pa.field("task_attempt", pa.int32()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
"""Columns of every ledger file (``replay_run_id`` is the directory partition)."""

_OUTCOME_FILE = re.compile(r"^outcome-p(\d+)-a(\d+)-b(\d+)-s(\d+)-f(\d+)\.parquet$")


def run_directory(ledger_path: str, replay_run_id: str) -> str:
    """The ledger directory of one replay run."""
    return f"{ledger_path.rstrip('/')}/replay_run_id={replay_run_id}"


def read_ledger(spark: SparkSession, ledger_path: str) -> DataFrame:
    """Every ledger row of every run (with ``replay_run_id``); empty when the ledger does not exist yet."""
    schema = from_arrow_schema(LEDGER_SCHEMA).add("replay_run_id", "string")
    fs, root = url_to_fs(ledger_path)
    if not fs.exists(root) or not fs.ls(root):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", ledger_path).parquet(ledger_path)


def sent_keys(spark: SparkSession, ledger_path: str) -> DataFrame:
    """The ``replay_key`` of every row any run recorded as sent."""
    return read_ledger(spark, ledger_path).filter(F.col("status") == SENT).select("replay_key").distinct()


def last_sent(spark: SparkSession, ledger_path: str) -> DataFrame:
    """``(target_entity, message_id, last_sent_at)``: when any run last sent each MessageId to a target
    (the duplicate-detection check's memory of what a target has seen)."""
    return (
        read_ledger(spark, ledger_path)
        .filter((F.col("status") == SENT) & F.col("message_id").isNotNull())
        .groupBy("target_entity", "message_id")
        .agg(F.max("recorded_at").alias("last_sent_at"))
    )


def write_planned(plan: DataFrame, ledger_path: str, replay_run_id: str, planned_at: datetime) -> None:
    """Append ``plan``'s rows as ``planned`` (before anything is sent: the write-ahead half of the ledger)."""
    rows = plan.select(
        *IDENTITY,
        F.lit(PLANNED).alias("status"),
        F.lit(None).cast("string").alias("error"),
        F.lit(None).cast("int").alias("task_attempt"),
        F.lit(planned_at.astimezone(UTC).isoformat()).cast("timestamp").alias("recorded_at"),
    )
    rows.write.mode("append").parquet(run_directory(ledger_path, replay_run_id))


@dataclass(frozen=True, slots=True)
class Progress:
    """What a run's outcome files say so far."""

    sent: int = 0
    failed: int = 0
    batches: int = 0


def progress(ledger_path: str, replay_run_id: str) -> Progress:
    """Sent and failed counts of a run, from its outcome file names (cheap: one directory listing)."""
    fs, directory = url_to_fs(run_directory(ledger_path, replay_run_id))
    if not fs.exists(directory):
        return Progress()
    sent = failed = batches = 0
    for path in fs.ls(directory, detail=False):
        match = _OUTCOME_FILE.match(str(path).rsplit("/", 1)[-1])
        if match:
            sent += int(match.group(4))
            failed += int(match.group(5))
            batches += 1
    return Progress(sent=sent, failed=failed, batches=batches)


class OutcomeWriter:
    """Executor side: records each batch's outcome durably before the task moves on (one per task)."""

    def __init__(self, ledger_path: str, replay_run_id: str, partition: int, attempt: int) -> None:
        self._fs, self._directory = url_to_fs(run_directory(ledger_path, replay_run_id))
        self._fs.makedirs(self._directory, exist_ok=True)
        self._partition = partition
        self._attempt = attempt
        self._batches = 0

    def sent_by_earlier_attempts(self) -> set[str]:
        """Keys this partition's earlier attempts in this run recorded as sent (a retried task skips them)."""
        keys: set[str] = set()
        for path in self._fs.ls(self._directory, detail=False):
            match = _OUTCOME_FILE.match(str(path).rsplit("/", 1)[-1])
            if match and int(match.group(1)) == self._partition and int(match.group(4)) > 0:
                with self._fs.open(path, "rb") as handle:
                    table = pq.read_table(handle, columns=["replay_key", "status"])
                for key, status in zip(
                    table.column("replay_key").to_pylist(), table.column("status").to_pylist(), strict=True
                ):
                    if status == SENT:
                        keys.add(key)
        return keys

    def record(self, rows: Sequence[Any], status: str, error: str | None) -> None:
        """Write one batch's outcome (``rows`` carry the ledger columns as attributes) atomically."""
        now = datetime.now(UTC)
        columns: dict[str, Iterable[Any]] = {name: [getattr(row, name) for row in rows] for name in IDENTITY}
        columns["status"] = [status] * len(rows)
        columns["error"] = [error] * len(rows)
        columns["task_attempt"] = [self._attempt] * len(rows)
        columns["recorded_at"] = [now] * len(rows)
        table = pa.Table.from_pydict(columns, schema=LEDGER_SCHEMA)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        self._batches += 1
        sent, failed = (len(rows), 0) if status == SENT else (0, len(rows))
        name = (
            f"outcome-p{self._partition:05d}-a{self._attempt}-b{self._batches:06d}-s{sent}-f{failed}.parquet"
        )
        temporary = f"{self._directory}/.{name}.tmp"  # hidden: Spark and progress() ignore it
        with self._fs.open(temporary, "wb") as handle:
            handle.write(buffer.getvalue())
        self._fs.mv(temporary, f"{self._directory}/{name}")
