"""A re-driven copy of a dead letter sent without a content type has none either: the re-drive reads the
dead letter with Busbar's receiver, which once read proton's absent content-type as the text "None" and
put that on the copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.redrive.job import run_redrive
from tests.shared.redrive.redrive_support import dead_letter_queue_messages, drain_queue, message, redrive_env


def test_a_redriven_copy_of_a_message_without_a_content_type_has_none(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    dead_letter_queue_messages(
        emulator.connection_string,
        queue,
        [
            message(b"{}", message_id="bare"),
            message(b"{}", message_id="json", content_type="application/json"),
        ],
        "MaxDeliveryCountExceeded",
        "boom",
    )
    summary = run_redrive(redrive_env(emulator, tmp_path, [queue]), receive_wait=0.3)
    assert summary.totals()["redriven"] == 2
    copies = drain_queue(emulator.connection_string, queue)
    assert sorted((copy.message_id, copy.content_type) for copy in copies) == [
        ("bare", None),
        ("json", "application/json"),
    ]
