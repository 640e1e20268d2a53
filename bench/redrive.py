"""Dead-letter re-drive throughput (issue 9) through the real SDKs against the emulator.

Starts the emulator as its own process (in memory) and measures:

* ``redrive``: a 10,000-message dead-letter queue (1 KB JSON bodies, 4 application properties, reason
  ``MaxDeliveryCountExceeded``) re-driven by one run (``shared.redrive.job.run_redrive``, discovery
  included, rate limit out of the way): messages per second, and that all arrived in the queue;
* ``archive_run``: the same with reason ``ValidationFailed``, so every message is archived to a local
  Parquet archive before it is completed: messages per second;
* ``archive_writer``: ``ArchiveWriter.write`` alone, 10,000 rows (1 KB bodies) written in files of 50 rows
  (the run's batch size) and in one file: rows per second and MB per second of Parquet written.

Writes ``bench/results/redrive.json``. Usage::

    .venv/bin/python bench/redrive.py [--messages 10000]
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.mgmt.servicebus.models import SBQueue
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.archive.rows import ArchiveRow  # noqa: E402
from shared.archive.writer import ArchiveWriter  # noqa: E402
from shared.management import ManagementClient, ManagementSettings  # noqa: E402
from shared.redrive.job import run_redrive  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "redrive.json"
BODY = json.dumps({"order": "x" * 1000}).encode()


def start_emulator() -> tuple[subprocess.Popen[str], dict[str, str]]:
    cmd = [sys.executable, "-m", "emulator", "--in-memory", "--amqp-port", "0", "--management-port", "0"]
    cmd += ["--log-level", "WARNING"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.stdout is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "connection" not in found:
        line = proc.stdout.readline()
        if match := re.search(r"ARM endpoint: (\S+)", line):
            found["endpoint"] = match.group(1)
        if match := re.search(r"Management token: (\S+)", line):
            found["token"] = match.group(1)
        if match := re.search(r"Connection string: (\S+)", line):
            found["connection"] = match.group(1)
    if "connection" not in found:
        proc.kill()
        raise RuntimeError("the emulator did not become ready")
    return proc, found


def fill_dead_letter_queue(emulator: dict[str, str], queue: str, total: int, reason: str) -> float:
    """Send ``total`` messages to ``queue`` and dead-letter them all; returns seconds taken."""
    started = time.perf_counter()
    with ServiceBusClient.from_connection_string(emulator["connection"]) as client:
        with client.get_queue_sender(queue) as sender:
            for start in range(0, total, 100):
                sender.send_messages(
                    [
                        ServiceBusMessage(
                            BODY,
                            message_id=f"m-{i}",
                            content_type="application/json",
                            subject="OrderPlaced",
                            application_properties={"tenant": "acme", "n": i, "ratio": 0.5, "ok": True},
                        )
                        for i in range(start, min(total, start + 100))
                    ]
                )
        with client.get_queue_receiver(queue, prefetch_count=200) as receiver:
            done = 0
            while done < total:
                batch = receiver.receive_messages(max_message_count=200, max_wait_time=5)
                if not batch:
                    break
                for message in batch:
                    receiver.dead_letter_message(message, reason=reason, error_description="bench")
                done += len(batch)
    return time.perf_counter() - started


def count(emulator: dict[str, str], queue: str, sub_queue: ServiceBusSubQueue | None = None) -> int:
    with (
        ServiceBusClient.from_connection_string(emulator["connection"]) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver,
    ):
        total, sequence = 0, 0
        while page := receiver.peek_messages(max_message_count=250, sequence_number=sequence):
            total += len(page)
            sequence = max(m.sequence_number for m in page) + 1
        return total


def env_for(emulator: dict[str, str], archive: Path, queue: str, total: int) -> dict[str, str]:
    return {
        "ServiceBusConnection": emulator["connection"],
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "bench",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": emulator["endpoint"],
        "BUSBAR_MANAGEMENT_TOKEN": emulator["token"],
        "BUSBAR_ARCHIVE_URL": str(archive),
        "BUSBAR_REDRIVE_ENTITIES": queue,
        "BUSBAR_REDRIVE_MAX_MESSAGES": str(total),
        "BUSBAR_REDRIVE_TIME_BUDGET_SECONDS": "3600",
        "BUSBAR_REDRIVE_RATE_PER_SECOND": "1000000",
    }


def measure_run(
    emulator: dict[str, str], management: ManagementClient, archive: Path, total: int, reason: str
) -> dict[str, Any]:
    queue = f"bench-{reason.lower()}"
    management.queues.create_or_update(*management.scope, queue, SBQueue(max_size_in_megabytes=81920))
    fill_seconds = fill_dead_letter_queue(emulator, queue, total, reason)
    started = time.perf_counter()
    summary = run_redrive(env_for(emulator, archive, queue, total), receive_wait=1.0)
    elapsed = time.perf_counter() - started
    return {
        "messages": total,
        "seconds": round(elapsed, 2),
        "messages_per_second": round(total / elapsed, 1),
        "totals": summary.totals(),
        "left_in_dead_letter_queue": count(emulator, queue, ServiceBusSubQueue.DEAD_LETTER),
        "in_queue_after": count(emulator, queue),
        "archive_files": len(summary.archive_files),
        "archived_bytes": summary.archived_bytes,
        "setup_seconds": round(fill_seconds, 1),
    }


def archive_rows(total: int) -> list[ArchiveRow]:
    now = datetime.now(UTC)
    props = json.dumps({"tenant": "acme", "n": 1})
    return [
        ArchiveRow(
            run_id="bench",
            archived_at=now,
            archived_date=now.strftime("%Y-%m-%d"),
            decision="archive",
            decision_detail="reason ValidationFailed",
            source_entity="orders",
            source_kind="queue",
            source_topic=None,
            source_subscription=None,
            target_entity="orders",
            message_id=f"m-{i}",
            session_id=None,
            correlation_id=None,
            subject="OrderPlaced",
            content_type="application/json",
            reply_to=None,
            reply_to_session_id=None,
            to=None,
            partition_key=None,
            time_to_live_ms=None,
            body=os.urandom(512) + BODY[:512],
            application_properties=props,
            contract_type=None,
            sequence_number=i,
            enqueued_time=now,
            delivery_count=10,
            dead_letter_reason="ValidationFailed",
            dead_letter_description="bench",
            dead_letter_source=None,
            redrive_count=0,
        )
        for i in range(total)
    ]


def measure_writer(directory: Path, total: int, per_file: int) -> dict[str, Any]:
    writer = ArchiveWriter(str(directory))
    rows = archive_rows(total)
    started = time.perf_counter()
    written = 0
    for start in range(0, total, per_file):
        written += sum(f.size for f in writer.write(f"bench-{per_file}", rows[start : start + per_file]))
    elapsed = time.perf_counter() - started
    return {
        "rows": total,
        "rows_per_file": per_file,
        "rows_per_second": round(total / elapsed, 1),
        "parquet_mb_per_second": round(written / elapsed / 1e6, 2),
        "body_mb_per_second": round(total * 1024 / elapsed / 1e6, 2),
        "parquet_bytes": written,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    proc, emulator = start_emulator()
    try:
        settings = ManagementSettings(
            "00000000-0000-0000-0000-000000000000",
            "bench",
            "sbemulatorns",
            emulator["endpoint"],
            emulator["token"],
        )
        with tempfile.TemporaryDirectory() as tmp, ManagementClient(settings) as management:
            results: dict[str, Any] = {
                "redrive": measure_run(
                    emulator, management, Path(tmp) / "a", args.messages, "MaxDeliveryCountExceeded"
                ),
                "archive_run": measure_run(
                    emulator, management, Path(tmp) / "b", args.messages, "ValidationFailed"
                ),
                "archive_writer": [
                    measure_writer(Path(tmp) / "w50", args.messages, 50),
                    measure_writer(Path(tmp) / "wall", args.messages, args.messages),
                ],
            }
    finally:
        proc.terminate()
        proc.wait(30)
    results["environment"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "emulator": "separate process, in memory",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
