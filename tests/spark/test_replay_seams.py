"""Where the replay meets the broker and the ledger: nothing lost to duplicate detection, each archived
failure replayed at most once (and a new failure of the same message again), the crash bound reported."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from emulator.testing import EmulatorHandle
from spark.params import ParameterError, ReplayParams, parse_params
from spark.replay import run
from tests.emulator.sdk_helpers import drain
from tests.spark.archive_factory import archive_row, write_archive
from tests.spark.management_args import management_args


def _params(tmp: Path, emulator: EmulatorHandle, run_id: str, *extra: str) -> ReplayParams:
    return parse_params(
        [
            *("--archive_path", str(tmp / "archive"), "--ledger_path", str(tmp / "ledger")),
            *("--report_path", str(tmp / "report"), "--connection_string", emulator.connection_string),
            *("--partitions", "2", "--batch_size", "5", "--replay_run_id", run_id, *extra),
        ],
        env={},
    )


def _drain(emulator: EmulatorHandle, queue: str, count: int) -> list[Any]:
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        return drain(receiver, count, wait=2)


def test_without_the_namespace_the_replay_refuses_to_start_saying_how_to_name_it(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"replay-noarm-{uuid.uuid4().hex[:8]}")
    write_archive(tmp_path / "archive", [archive_row(source_entity=queue, message_id="m-1")])
    with pytest.raises(ParameterError, match="--namespace") as refused:
        run(_params(tmp_path, emulator, "no-arm"), spark)
    assert "--duplicate_detection_check false" in str(refused.value)
    assert _drain(emulator, queue, 1) == []  # nothing was sent


def test_rows_inside_the_targets_window_are_held_and_a_later_run_sends_them(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    window = 20  # seconds: the smallest duplicate-detection window Azure allows
    queue = emulator.create_queue(
        f"replay-window-{uuid.uuid4().hex[:8]}",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(seconds=window),
    )
    now = datetime.now(UTC)
    recent = now - timedelta(seconds=8)  # enqueued in the target 8 s ago: inside its window
    rows = [
        archive_row(
            source_entity=queue, message_id="recent", sequence_number=1, archived_at=now, enqueued_time=recent
        ),
        archive_row(source_entity=queue, message_id="old", sequence_number=2),  # enqueued months ago
    ]
    write_archive(tmp_path / "archive", rows)
    management = management_args(emulator.emulator)
    first = run(_params(tmp_path, emulator, "held-1", *management), spark)
    assert first.outcomes == {"held": 1, "sent": 1}
    assert [m.message_id for m in _drain(emulator, queue, 1)] == ["old"]
    time.sleep(max(0.0, (recent + timedelta(seconds=window + 6) - datetime.now(UTC)).total_seconds()))
    second = run(_params(tmp_path, emulator, "held-2", *management), spark)
    assert second.outcomes == {"already_sent": 1, "sent": 1}
    assert [m.message_id for m in _drain(emulator, queue, 1)] == ["recent"]


def test_a_hold_queue_row_the_endpoint_queue_saw_inside_its_window_is_held_not_dropped(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    """A parked message dead-lettered in an ordered endpoint's hold queue goes back to the endpoint queue,
    which saw its MessageId before it was parked: every endpoint queue requires duplicate detection, so a
    send inside the window would be accepted and dropped, and the ledger would call it sent."""
    queue = emulator.create_queue(
        f"replay-ordered-{uuid.uuid4().hex[:8]}",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(seconds=20),
    )
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("parked", message_id="parked-1"))
    assert [m.message_id for m in _drain(emulator, queue, 1)] == ["parked-1"]  # handled, then parked
    row = archive_row(
        source_entity=f"{queue}.held",
        target_entity=queue,
        message_id="parked-1",
        archived_at=datetime.now(UTC),
        enqueued_time=datetime.now(UTC),  # parked just now, after the endpoint queue saw it
    )
    write_archive(tmp_path / "archive", [row])

    result = run(_params(tmp_path, emulator, "held-ordered", *management_args(emulator.emulator)), spark)

    assert result.outcomes == {"held": 1}


def test_a_message_that_fails_again_after_its_replay_is_replayed_again(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"replay-again-{uuid.uuid4().hex[:8]}")
    first_failure = archive_row(source_entity=queue, message_id="order-7", sequence_number=10, run_id="r1")
    write_archive(tmp_path / "archive", [first_failure])
    management = management_args(emulator.emulator)
    assert run(_params(tmp_path, emulator, "again-1", *management), spark).outcomes == {"sent": 1}
    assert len(_drain(emulator, queue, 1)) == 1
    # The replayed copy fails again: a new delivery (new sequence number), archived again by a later run.
    second_failure = archive_row(
        source_entity=queue,
        message_id="order-7",
        sequence_number=11,
        run_id="r2",
        archived_at=first_failure.archived_at + timedelta(hours=1),
    )
    write_archive(tmp_path / "archive", [second_failure])
    assert run(_params(tmp_path, emulator, "again-2", *management), spark).outcomes == {"sent": 1}
    assert len(_drain(emulator, queue, 1)) == 1
    # Each failure once: a third run sends nothing.
    assert run(_params(tmp_path, emulator, "again-3", *management), spark).outcomes == {"already_sent": 1}


def test_the_summary_bounds_what_a_crash_can_repeat_on_targets_without_duplicate_detection(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    plain = emulator.create_queue(f"replay-plain-{uuid.uuid4().hex[:8]}")
    guarded = emulator.create_queue(
        f"replay-guarded-{uuid.uuid4().hex[:8]}", requires_duplicate_detection=True
    )
    rows = [archive_row(source_entity=plain, message_id=f"p-{n}", sequence_number=n) for n in range(12)]
    rows += [archive_row(source_entity=guarded, message_id=f"g-{n}", sequence_number=n) for n in range(3)]
    write_archive(tmp_path / "archive", rows)
    summary = run(_params(tmp_path, emulator, "bound", *management_args(emulator.emulator)), spark)
    assert summary.outcomes == {"sent": 15}
    # two tasks x batches of five, and no bound for the target whose duplicate detection absorbs repeats
    assert summary.crash_repeat_bound == {plain: 10}
    assert "up to 10 messages twice" in summary.render()
    assert len(_drain(emulator, plain, 12)) == 12
