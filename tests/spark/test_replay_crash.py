"""A replay killed midway and run again: every MessageId reaches the receiver once, sessions in order.

The first run is ``python -m spark.replay`` in its own process group (its own local Spark); the test hook
``BUSBAR_REPLAY_TEST_CRASH_AFTER_BATCHES`` makes a send task SIGKILL the whole job right after the broker
acknowledged a batch and before the ledger recorded it -- the one window the ledger cannot close. The target
queue requires duplicate detection, which absorbs the re-sent copies of that batch (see spark.replay).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from emulator.testing import EmulatorHandle
from spark import ledger
from spark.params import parse_params
from spark.replay import run
from tests.emulator.sdk_helpers import app_properties, drain, message_id
from tests.spark.archive_factory import archive_row, write_archive
from tests.spark.management_args import management_args

REPO_ROOT = Path(__file__).resolve().parents[2]
SESSIONS, PER_SESSION, BATCH, TASKS, CRASH_AFTER = 8, 25, 10, 2, 3
TOTAL = SESSIONS * PER_SESSION
# The job starts its own JVM: 24 s alone on 2 cores, 49 s beside four busy processes, and over 100 s in a
# CI run beside three xdist workers with JVMs of their own. The test's own timeout (480 s) bounds the rest.
CRASH_RUN_TIMEOUT_SECONDS = 300


def _replay_until_crash(
    tmp: Path, connection_string: str, run_id: str, crash_after: int, management: list[str]
) -> subprocess.CompletedProcess[str]:
    """``python -m spark.replay`` with the crash hook set, in a process group of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    env["BUSBAR_REPLAY_TEST_CRASH_AFTER_BATCHES"] = str(crash_after)
    args = [sys.executable, "-m", "spark.replay", "--spark_master", f"local[{TASKS}]"]
    args += ["--archive_path", str(tmp / "archive"), "--ledger_path", str(tmp / "ledger")]
    args += [
        "--report_path",
        str(tmp / "report"),
        "--replay_run_id",
        run_id,
        "--connection_string",
        connection_string,
    ]
    args += ["--partitions", str(TASKS), "--batch_size", str(BATCH), *management]
    process = subprocess.Popen(
        args,
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # Pipes are the barrier: communicate() returns when every process holding them has exited -- the
        # driver, its JVM, and Spark's Python daemon and workers (a process group of their own), so a task
        # that sends and records one more batch after the kill has done so before the test reads the ledger.
        stdout, stderr = process.communicate(timeout=CRASH_RUN_TIMEOUT_SECONDS)
    finally:
        # the job leads its own process group: make sure nothing of it (JVM, Python workers) outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.poll() is None:
            process.wait(10)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_replay_killed_midway_and_rerun_delivers_each_message_once_in_session_order(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"replay-crash-{uuid.uuid4().hex[:8]}", requires_duplicate_detection=True)
    rows = [
        archive_row(
            source_entity=queue,
            message_id=f"s{s}-{n}",
            session_id=f"s{s}",
            sequence_number=1000 * n + s,
            properties={"n": n},
        )
        for s in range(SESSIONS)
        for n in range(PER_SESSION)
    ]
    write_archive(tmp_path / "archive", rows)
    namespace = emulator.emulator.namespace

    def at_broker() -> int:
        counts = emulator.call(lambda: namespace.counts(namespace.queues[queue.lower()]))
        assert isinstance(counts, dict)
        return int(counts["activeMessageCount"])

    crashed = _replay_until_crash(
        tmp_path, emulator.connection_string, "crash-1", CRASH_AFTER, management_args(emulator.emulator)
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    recorded = ledger.progress(str(tmp_path / "ledger"), "crash-1").sent
    delivered = at_broker()
    # The kill hit the window: the broker has the crashing task's last batch, the ledger does not -- and
    # never more than one batch per task.
    assert recorded < delivered <= recorded + BATCH * TASKS, (recorded, delivered, crashed.stderr[-2000:])
    assert recorded < TOTAL  # (the other task may finish its partition before it notices the dead driver)

    # The re-run (in this test's own SparkSession: a JVM start less) completes what the ledger lacks.
    rerun = run(
        parse_params(
            [
                *("--archive_path", str(tmp_path / "archive"), "--ledger_path", str(tmp_path / "ledger")),
                *(
                    "--report_path",
                    str(tmp_path / "report"),
                    "--connection_string",
                    emulator.connection_string,
                ),
                *("--partitions", str(TASKS), "--batch_size", str(BATCH), "--replay_run_id", "crash-2"),
                *management_args(emulator.emulator),
            ],
            env={},
        ),
        spark,
    )
    assert rerun.outcomes == {"already_sent": recorded, "sent": TOTAL - recorded}

    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue, prefetch_count=50) as receiver,
    ):
        received = drain(receiver, TOTAL, wait=2)
    assert at_broker() == 0  # nothing beyond the TOTAL received: the re-sent batch was dropped as duplicate
    ids = [message_id(m) for m in received]
    assert sorted(ids) == sorted(f"s{s}-{n}" for s in range(SESSIONS) for n in range(PER_SESSION))
    order: dict[str, list[int]] = defaultdict(list)
    for message in received:
        order[str(message.session_id)].append(int(app_properties(message)["n"]))
    assert order == {f"s{s}": list(range(PER_SESSION)) for s in range(SESSIONS)}
