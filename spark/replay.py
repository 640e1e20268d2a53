"""Orchestration of a replay run: read the archive, plan, (dry run: report and stop), send, report.

Run it as ``.venv/bin/python -m spark.replay --archive_path … --ledger_path … --report_path … [--dry_run]``
locally (``local[*]`` Spark; ``--connection_string``, or ``ServiceBusConnection`` and the ``BUSBAR_*``
management settings of local.settings.json, the running ``make run`` and the environment) or as the
Databricks wheel task in ``infra/databricks/databricks.yml`` (same keyword parameters).

Exactly-once as receivers see it -- the guarantee, precisely:

1. The plan is written to the ledger as ``planned`` before anything is sent.
2. A send task records each batch as ``sent`` in the ledger (a whole Parquet file, atomically renamed)
   after the broker acknowledged it and before it builds the next batch.
3. A re-run anti-joins its plan against every ``sent`` row of every run, so nothing recorded as sent is
   sent again; a retried task skips what earlier attempts of its partition recorded.
4. What remains is the window between the broker's acknowledgement and the ledger write: a crash there
   leaves at most ONE batch per running task delivered but unrecorded, and a re-run sends it again. Those
   copies keep their original MessageId, so a target queue with duplicate detection (window longer than the
   time to re-run) drops them and receivers see each MessageId once; without duplicate detection a
   receiver can see those few messages twice (at most ``batch_size`` x tasks per crash) and must dedupe on
   MessageId. Replay targets should therefore require duplicate detection; the kill test pins both halves.
5. Speculative execution would run a send task twice at once: the job refuses to start with it on.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark import ledger, report
from spark.archive import read_archive
from spark.columns import SEND
from spark.params import (
    Connection,
    ParameterError,
    ReplayParams,
    local_app_env,
    parse_params,
    resolve_connection,
)
from spark.sender import SenderConfig, send_partition
from spark.targets import fetch_targets, held_reason, hold_inside_window, targets_frame
from spark.transforms import dedupe_latest, order_for_sending, plan_summary, resolve_targets, select_rows

REPO_ROOT = Path(__file__).resolve().parent.parent


def build_session(params: ReplayParams) -> SparkSession:
    """The job's SparkSession: Databricks' own, or a local one (``--spark_master``, default ``local[*]``)."""
    builder = SparkSession.builder.appName(f"busbar-replay-{params.replay_run_id}")
    if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        # Python workers must run this interpreter (its venv has azure-servicebus), not PATH's python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.master(params.spark_master or "local[*]")
            .config("spark.speculation", "false")
            .config("spark.sql.session.timeZone", "UTC")
            # a local machine has a few cores: the default 200 shuffle partitions only add task overhead
            .config("spark.sql.shuffle.partitions", str(max(2, 2 * (os.cpu_count() or 1))))
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
        )
    return builder.getOrCreate()


def check_session(spark: SparkSession) -> None:
    """Refuse configurations that break the guarantee (speculation) or the time semantics."""
    if spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
        raise ParameterError("spark.speculation is on: a speculative copy of a send task would send twice")
    spark.conf.set("spark.sql.session.timeZone", "UTC")


def ship_code(spark: SparkSession) -> None:
    """Local runs: put ``spark`` and ``shared`` on the Python workers' path (a Databricks cluster has the
    wheel installed instead). The zip is named by its content, so adding it again is a no-op."""
    files = sorted(
        p
        for package in ("spark", "shared")
        for p in (REPO_ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    archive = Path(tempfile.gettempdir()) / f"busbar-replay-code-{digest.hexdigest()[:16]}.zip"
    if not archive.exists():
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w") as bundle:
            for path in files:
                bundle.write(path, str(path.relative_to(REPO_ROOT)))
        partial.replace(archive)
    spark.sparkContext.addPyFile(str(archive))


def _secret_reader(spark: SparkSession) -> Any:
    try:
        from pyspark.dbutils import DBUtils  # only on Databricks
    except ImportError:
        return None
    return DBUtils(spark).secrets


class _ProgressPrinter:
    """Prints ``sent/planned`` and the rate every few seconds while the send phase runs (from the ledger)."""

    def __init__(self, params: ReplayParams, planned: int) -> None:
        self._params = params
        self._planned = planned
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="replay-progress", daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> _ProgressPrinter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(self._params.progress_interval):
            done = ledger.progress(self._params.ledger_path, self._params.replay_run_id)
            elapsed = max(time.monotonic() - self._started, 1e-9)
            print(
                f"[replay] progress: {done.sent}/{self._planned} sent, {done.failed} failed, "
                f"{done.sent / elapsed:.0f} msg/s",
                file=sys.stderr,
                flush=True,
            )


def _write(df: DataFrame, path: str) -> None:
    df.write.mode("append").parquet(path)


def run(
    params: ReplayParams, spark: SparkSession, connection: Connection | None = None
) -> report.ReplaySummary:
    """One replay run; returns (and writes, and prints) its summary."""
    job_started = time.monotonic()
    check_session(spark)
    planned_at = datetime.now(UTC)
    summary = report.ReplaySummary(replay_run_id=params.replay_run_id, dry_run=params.dry_run)
    summary.params = {k: v for k, v in _params_dict(params).items() if k not in ("connection_string",)}
    results_path = f"{report.run_directory(params.report_path, params.replay_run_id)}/results"

    archive = read_archive(spark, params.archive_path)
    resolved = resolve_targets(dedupe_latest(select_rows(archive, params.selection)), params.target_overrides)
    resolved = resolved.persist()  # every later step starts here: read and dedupe the archive once
    try:
        _plan_and_send(spark, params, summary, resolved, results_path, planned_at, connection)
    finally:
        resolved.unpersist()
    return _finish(spark, params, summary, results_path, job_started)


def _plan_and_send(
    spark: SparkSession,
    params: ReplayParams,
    summary: report.ReplaySummary,
    resolved: DataFrame,
    results_path: str,
    planned_at: datetime,
    connection: Connection | None,
) -> None:
    partitions = params.partitions or spark.sparkContext.defaultParallelism
    routable = resolved.filter(F.col("unroutable").isNull())
    unroutable = report.result_rows(
        resolved.filter(F.col("unroutable").isNotNull()),
        params.replay_run_id,
        report.UNROUTABLE_OUTCOME,
        F.col("unroutable"),
        planned_at,
    )
    if not params.force:
        # Rows a run already sent are reported as such first; the rest are checked for the window. A dry
        # run reads the ledger too: it reports what this run would do, and a run would skip them.
        sent = ledger.sent_keys(spark, params.ledger_path)
        already = routable.join(sent, "replay_key", "left_semi")
        unroutable = unroutable.unionByName(
            report.result_rows(already, params.replay_run_id, report.ALREADY_SENT_OUTCOME, None, planned_at)
        )
        routable = routable.join(sent, "replay_key", "left_anti")
    routable, held, without_detection = _hold_duplicates(spark, params, routable, planned_at)
    reason = held_reason(F.col("target_entity"), F.col("held_until"))
    unroutable = unroutable.unionByName(
        report.result_rows(held, params.replay_run_id, report.HELD_OUTCOME, reason, planned_at)
    )
    if params.dry_run:
        summary.plan = [row.asDict() for row in plan_summary(routable).collect()]
        plan_path = f"{report.run_directory(params.report_path, params.replay_run_id)}/plan"
        plan = (
            order_for_sending(routable, partitions)
            .drop("body", "unroutable")
            .withColumn("replay_run_id", F.lit(params.replay_run_id))
        )
        _write(plan, plan_path)
        planned_rows = report.result_rows(
            routable, params.replay_run_id, report.PLANNED_OUTCOME, None, planned_at
        )
        _write(planned_rows.unionByName(unroutable), results_path)
        if params.rate_limit > 0:
            planned = sum(int(entry["messages"]) for entry in summary.plan)
            summary.estimated_seconds_at_rate_limit = planned / params.rate_limit
        return

    to_send = routable
    _write(unroutable, results_path)
    ordered = order_for_sending(to_send, partitions).persist()
    try:
        ledger.write_planned(ordered, params.ledger_path, params.replay_run_id, planned_at)
        planned = ordered.count()
        if without_detection:
            per_target = ordered.filter(F.col("target_entity").isin(without_detection)).groupBy(
                "target_entity"
            )
            for row in per_target.count().collect():
                bound = min(int(row["count"]), params.batch_size * partitions)
                summary.crash_repeat_bound[row["target_entity"]] = bound
        config = SenderConfig(
            connection=connection or resolve_connection(params, _secret_reader(spark)),
            ledger_path=params.ledger_path,
            replay_run_id=params.replay_run_id,
            planned_at=planned_at,  # aware: PySpark converts it exactly
            transform=params.transform,
            message_id_policy=params.message_id_policy,
            batch_size=params.batch_size,
            rate_per_task=params.rate_limit / partitions if params.rate_limit > 0 else 0.0,
            max_attempts=params.max_attempts,
            backoff_seconds=params.backoff_seconds,
            **_crash_hook(params),
        )
        if (spark.sparkContext.master or "").startswith("local"):
            ship_code(spark)
        outcomes = ordered.select(*SEND).rdd.mapPartitions(functools.partial(send_partition, config))
        print(
            f"[replay] {params.replay_run_id}: sending {planned} messages in {partitions} tasks",
            file=sys.stderr,
        )
        send_started = time.monotonic()
        with _ProgressPrinter(params, planned):
            _write(spark.createDataFrame(outcomes, report.RESULT_SCHEMA), results_path)
        summary.send_seconds = time.monotonic() - send_started
        if planned:
            summary.messages_per_second = planned / summary.send_seconds
    finally:
        ordered.unpersist()


def _hold_duplicates(
    spark: SparkSession, params: ReplayParams, routable: DataFrame, planned_at: datetime
) -> tuple[DataFrame, DataFrame, list[str]]:
    """Split ``routable`` into rows to send and rows held inside a target's duplicate-detection window
    (see :mod:`spark.targets`); also the targets without duplicate detection (for the crash bound)."""
    empty = routable.limit(0).withColumn("held_until", F.lit(None).cast("timestamp"))
    if not params.duplicate_detection_check:
        return routable, empty, []
    if params.management is None:
        raise ParameterError(
            "cannot check the targets' duplicate detection: name the namespace (--subscription_id, "
            "--resource_group, --namespace, or the BUSBAR_* settings), or accept silent drops with "
            "--duplicate_detection_check false"
        )
    from shared.management import ManagementClient

    names = [row["target_entity"] for row in routable.select("target_entity").distinct().collect()]
    with ManagementClient(params.management) as management:
        targets = fetch_targets(names, management)
    without = [t.name for t in targets if not t.requires_duplicate_detection]
    checked = hold_inside_window(
        routable,
        targets_frame(spark, targets),
        ledger.last_sent(spark, params.ledger_path),
        planned_at,
        params.message_id_policy,
    ).persist()
    held = checked.filter(F.col("held_until").isNotNull())
    return checked.filter(F.col("held_until").isNull()).drop("held_until"), held, without


def _crash_hook(params: ReplayParams) -> dict[str, int | None]:
    if params.crash_after_batches is None:
        return {}
    if os.getpgid(0) != os.getpid():  # never kill a process group this job does not lead
        raise ParameterError("the crash test hook needs the job to lead its own process group")
    return {"crash_after_batches": params.crash_after_batches, "crash_process_group": os.getpid()}


def _params_dict(params: ReplayParams) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(params)


def _finish(
    spark: SparkSession,
    params: ReplayParams,
    summary: report.ReplaySummary,
    results_path: str,
    started: float,
) -> report.ReplaySummary:
    results = spark.read.schema(report.RESULT_SCHEMA).parquet(results_path)
    report.summarize(results, summary)
    summary.job_seconds = time.monotonic() - started
    report.write_summary(params.report_path, summary)
    print(summary.render(), flush=True)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m spark.replay`` and of the Databricks wheel task. App settings (connection,
    management plane) are the local app's, as :func:`spark.params.local_app_env` finds them."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        env = local_app_env(arguments)
        params = parse_params(arguments, env)
    except ParameterError as error:
        print(f"replay: {error}", file=sys.stderr)
        return 2
    spark = build_session(params)
    try:
        connection = None if params.dry_run else resolve_connection(params, _secret_reader(spark), env)
        summary = run(params, spark, connection)
    except (ParameterError, FileNotFoundError) as error:
        print(f"replay: {error}", file=sys.stderr)
        return 2
    return 1 if summary.count("failed") or summary.count("invalid") else 0


def cli() -> None:
    """Console-script entry point (``busbar-replay``, the Databricks wheel task): exits with main's code."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
