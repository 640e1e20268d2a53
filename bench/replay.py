"""Replay throughput: the Spark job against a single-process SDK batch sender, same messages, same run.

Writes an archive of ``--messages`` (default 100,000) archived messages (1 KB bodies, two typed
properties, 1,000 sessions) with the re-drive's ArchiveWriter, then, each against a FRESH emulator
subprocess (``python -m emulator --in-memory``, so neither pays for the other's stored messages):

* ``sdk``: one process, one ``ServiceBusSender``: builds every message with the replay's own
  ``build_message`` and sends ``ServiceBusMessageBatch`` es of up to ``--batch-size`` messages;
* ``spark``: ``spark.replay.run`` on ``local[N]`` for each N in ``--partitions`` (N send tasks), after the
  SparkSession is up (start-up excluded). ``send_phase`` is the Spark action that sends (tasks, Python
  workers, links, batches, ledger appends); ``job`` is the whole run after start-up (archive read, dedupe,
  plan, ledger plan write, send, report).

Both sides' message counts are checked on the broker (ARM countDetails). Writes
``bench/results/replay.json``. Usage::

    .venv/bin/python bench/replay.py [--messages 100000] [--partitions 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.mgmt.servicebus.models import SBQueue  # noqa: E402
from azure.servicebus import ServiceBusClient  # noqa: E402

from shared.archive.properties import encode_properties  # noqa: E402
from shared.archive.reader import read_archive  # noqa: E402
from shared.archive.rows import ArchiveRow  # noqa: E402
from shared.archive.writer import ArchiveWriter  # noqa: E402
from shared.management import ManagementClient, ManagementSettings  # noqa: E402
from spark.params import PropertyTransform, parse_params  # noqa: E402
from spark.sender import build_message  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "replay.json"
SOURCE = "orders"


class Emulator:
    """A ``python -m emulator --in-memory`` subprocess with ARM access."""

    def __init__(self) -> None:
        cmd = [sys.executable, "-m", "emulator", "--in-memory", "--amqp-port", "0", "--management-port", "0"]
        cmd += ["--log-level", "WARNING"]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
        assert self.proc.stdout is not None
        text = ""
        deadline = time.monotonic() + 30
        while "Connection string:" not in text and time.monotonic() < deadline:
            text += self.proc.stdout.readline()
        mgmt = re.search(r"management=[^:\s]+:(\d+)", text)
        token = re.search(r"Management token: (\S+)", text)
        conn = re.search(r"Connection string: (\S+)", text)
        if not (mgmt and token and conn):
            self.proc.kill()
            raise RuntimeError(f"emulator did not start:\n{text}")
        self.connection_string = conn.group(1)
        settings = ManagementSettings(
            subscription_id="bench",
            resource_group="bench",
            namespace="sbemulatorns",
            endpoint=f"http://127.0.0.1:{mgmt.group(1)}",
            token=token.group(1),
        )
        self.arm = ManagementClient(settings)
        # The replay's duplicate-detection check reads its targets through the same ARM endpoint.
        self.management_args = [
            *("--subscription_id", settings.subscription_id, "--resource_group", settings.resource_group),
            *("--namespace", settings.namespace, "--management_endpoint", settings.endpoint),
            f"--management_token={settings.token or ''}",  # "=": a token may start with "-"
        ]

    def create_queue(self, name: str) -> str:
        rg, ns = self.arm.scope
        self.arm.queues.create_or_update(rg, ns, name, SBQueue(max_size_in_megabytes=81920))
        return name

    def active(self, name: str) -> int:
        rg, ns = self.arm.scope
        return int(self.arm.queues.get(rg, ns, name).count_details.active_message_count)

    def stop(self) -> None:
        self.arm.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def write_bench_archive(root: Path, messages: int, sessions: int) -> None:
    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    body = b"x" * 1024
    rows = [
        ArchiveRow(
            run_id="bench",
            archived_at=at,
            archived_date="2026-03-01",
            decision="archive",
            decision_detail=None,
            source_entity=SOURCE,
            source_kind="queue",
            source_topic=None,
            source_subscription=None,
            target_entity=None,
            message_id=f"m-{n:07d}",
            session_id=f"s-{n % sessions:05d}",
            correlation_id=None,
            subject="OrderPlaced",
            content_type="application/octet-stream",
            reply_to=None,
            reply_to_session_id=None,
            to=None,
            partition_key=None,
            time_to_live_ms=None,
            body=body,
            application_properties=encode_properties({"n": n, "tenant": "contoso"}),
            contract_type="Sales.OrderPlaced",
            sequence_number=n + 1,
            enqueued_time=at - timedelta(hours=1),
            delivery_count=10,
            dead_letter_reason="MaxDeliveryCountExceeded",
            dead_letter_description=None,
            dead_letter_source=None,
            redrive_count=0,
        )
        for n in range(messages)
    ]
    writer = ArchiveWriter(str(root))
    for start in range(0, messages, 20_000):  # several files, as several re-drive runs would leave
        writer.write(f"bench-{start}", rows[start : start + 20_000])


def sdk_single_process(archive: Path, batch_size: int) -> dict[str, Any]:
    """Read the archive with pyarrow, then build and batch-send every message from one process."""
    emulator = Emulator()
    try:
        queue = emulator.create_queue("replay-sdk")
        job_started = time.perf_counter()  # the whole job: read, order, build, send
        table = read_archive(str(archive))
        rows = sorted(table.to_pylist(), key=lambda r: (r["session_id"], r["sequence_number"]))

        class Row:
            def __init__(self, values: dict[str, Any]) -> None:
                self.__dict__.update(values)
                self.replay_key = f"{values['source_entity']}|{values['message_id']}"

        started = time.perf_counter()
        with (
            ServiceBusClient.from_connection_string(emulator.connection_string) as client,
            client.get_queue_sender(queue) as sender,
        ):
            batch = sender.create_message_batch()
            in_batch = 0
            for values in rows:
                message = build_message(Row(values), PropertyTransform(), "bench-sdk")
                if in_batch >= batch_size:
                    sender.send_messages(batch)
                    batch, in_batch = sender.create_message_batch(), 0
                try:
                    batch.add_message(message)
                except ValueError:  # MessageSizeExceededError: the batch is full by bytes
                    sender.send_messages(batch)
                    batch, in_batch = sender.create_message_batch(), 0
                    batch.add_message(message)
                in_batch += 1
            if in_batch:
                sender.send_messages(batch)
        elapsed = time.perf_counter() - started
        job = time.perf_counter() - job_started
        delivered = emulator.active(queue)
    finally:
        emulator.stop()
    return {
        "seconds": round(elapsed, 2),
        "msgs_per_s": round(len(rows) / elapsed),
        "job_seconds": round(job, 2),
        "job_msgs_per_s": round(len(rows) / job),
        "delivered": delivered,
    }


def spark_replay(archive: Path, work: Path, partitions: int, batch_size: int) -> dict[str, Any]:
    from spark.replay import build_session, run

    emulator = Emulator()
    try:
        queue = emulator.create_queue(f"replay-spark-{partitions}")
        run_dir = work / f"spark-{partitions}"
        params = parse_params(
            [
                *("--archive_path", str(archive), "--ledger_path", str(run_dir / "ledger")),
                *(
                    "--report_path",
                    str(run_dir / "report"),
                    "--connection_string",
                    emulator.connection_string,
                ),
                *("--partitions", str(partitions), "--batch_size", str(batch_size)),
                *("--target_overrides", f"{SOURCE}={queue}", "--spark_master", f"local[{partitions}]"),
                *("--replay_run_id", f"bench-{partitions}", "--progress_interval", "10"),
                *emulator.management_args,
            ],
            env={},
        )
        spark_started = time.perf_counter()
        spark = build_session(params)
        spark.range(1).count()  # the JVM and the first job are up: start-up ends here
        startup = time.perf_counter() - spark_started
        try:
            summary = run(params, spark, None)
        finally:
            spark.stop()
        delivered = emulator.active(queue)
    finally:
        emulator.stop()
    sent = summary.count("sent")
    assert summary.send_seconds is not None and summary.job_seconds is not None
    return {
        "partitions": partitions,
        "spark_startup_seconds": round(startup, 2),
        "send_phase_seconds": round(summary.send_seconds, 2),
        "send_phase_msgs_per_s": round(sent / summary.send_seconds),
        "job_seconds": round(summary.job_seconds, 2),
        "job_msgs_per_s": round(sent / summary.job_seconds),
        "outcomes": summary.outcomes,
        "delivered": delivered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--partitions", default="1,2", help="comma-separated send-task counts to measure")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        work = Path(tmp)
        archive = work / "archive"
        write_bench_archive(archive, args.messages, args.sessions)
        print(f"archive of {args.messages} messages written", flush=True)
        sdk = sdk_single_process(archive, args.batch_size)
        print(f"sdk single process: {sdk}", flush=True)
        spark_runs = []
        for partitions in (int(p) for p in args.partitions.split(",")):
            result = spark_replay(archive, work, partitions, args.batch_size)
            result["send_phase_ratio_to_sdk_send"] = round(
                result["send_phase_msgs_per_s"] / sdk["msgs_per_s"], 2
            )
            # The figure: the whole job (after Spark start-up) against the whole SDK job.
            result["job_ratio_to_sdk_job"] = round(result["job_msgs_per_s"] / sdk["job_msgs_per_s"], 2)
            print(f"spark: {result}", flush=True)
            spark_runs.append(result)
    document = {
        "benchmark": "replay",
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "messages": args.messages,
        "sessions": args.sessions,
        "message_body_bytes": 1024,
        "batch_size": args.batch_size,
        "emulator": "python -m emulator --in-memory (a fresh subprocess per measurement)",
        "sdk_single_process": sdk,
        "spark": spark_runs,
        "target": "whole replay job (after Spark start-up) >= 70% of the single-process SDK job "
        "(read the archive, order, build, send)",
        "load_average": os.getloadavg(),
        "notes": "2 shared cores: the emulator, the JVM and the Python send workers compete for them, so "
        "local[2] cannot double local[1] here; figures vary with what else runs on the machine. On "
        "Databricks each worker core runs one send task against the real namespace (no emulator on the "
        "same cores): throughput grows with tasks until the namespace's throttling limit (Standard: about "
        "1,000 operations/s of credits per namespace; --rate_limit keeps the job under it), so 2 workers x "
        "4 cores = 8 tasks would be limited by the namespace, not by Spark.",
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
