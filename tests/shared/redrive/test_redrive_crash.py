"""A re-drive killed between send (or archive write) and complete leaves a duplicate, never a loss."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusSubQueue

from shared.archive.reader import read_archive
from shared.redrive.job import run_redrive
from tests.shared.redrive.redrive_support import (
    dead_letter_queue_messages,
    drain_queue,
    message,
    peek_queue,
    redrive_env,
)

ROOT = Path(__file__).resolve().parents[3]
HELPER = Path(__file__).with_name("crash_during_run.py")
DLQ = ServiceBusSubQueue.DEAD_LETTER


def kill_at(point: str, env: dict[str, str], marker: Path) -> None:
    """Run the CLI in a subprocess and SIGKILL it once it reached ``point`` (send | archive). It runs in the
    test's directory: the CLI reads ./local.settings.json, and the checkout's is a developer's."""
    process = subprocess.Popen(
        [sys.executable, str(HELPER), str(marker), point],
        cwd=marker.parent,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, f"the re-drive exited before it reached the {point}"
            assert time.monotonic() < deadline, f"the re-drive never reached the {point}"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.subprocess
def test_a_run_killed_between_send_and_complete_leaves_a_duplicate_and_the_next_run_finishes_it(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(lock_duration="PT5S")
    cs = emulator.connection_string
    dead_letter_queue_messages(
        cs, queue, [message(b"precious", message_id="keep-me")], "MaxDeliveryCountExceeded"
    )
    env = redrive_env(emulator, tmp_path / "archive", [queue])

    kill_at("send", env, tmp_path / "sent")

    # Both copies exist: the sent one in the queue and the original, never completed, in the DLQ.
    assert [m.message_id for m in peek_queue(cs, queue)] == ["keep-me"]
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["keep-me"]
    time.sleep(5.5)  # the killed run's lock on the original expires
    summary = run_redrive(env, receive_wait=0.3)
    assert summary.totals()["redriven"] == 1 and summary.errors == []
    assert peek_queue(cs, queue, DLQ) == []
    copies = drain_queue(cs, queue)
    assert [(m.message_id, b"".join(m.body)) for m in copies] == [("keep-me", b"precious")] * 2


@pytest.mark.subprocess
def test_a_run_killed_between_archive_write_and_complete_keeps_the_message_and_its_row(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(lock_duration="PT5S")
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"evidence", message_id="row-1")], "ValidationFailed")
    env = redrive_env(emulator, tmp_path / "archive", [queue])

    kill_at("archive", env, tmp_path / "archived")

    assert read_archive(str(tmp_path / "archive")).column("message_id").to_pylist() == ["row-1"]
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["row-1"]
    time.sleep(5.5)
    summary = run_redrive(env, receive_wait=0.3)
    assert summary.totals()["archived"] == 1 and summary.errors == []
    assert peek_queue(cs, queue, DLQ) == []
    # A second row for the same message (the next run has its own run id): a duplicate, not a loss.
    rows = read_archive(str(tmp_path / "archive")).to_pylist()
    assert sorted(r["message_id"] for r in rows) == ["row-1", "row-1"]
    assert len({r["sequence_number"] for r in rows}) == 1
