"""Re-drive of transfer dead-letter queues (``$Transfer/$DeadLetterQueue``: messages a send-via transfer
could not deliver, e.g. from endpoints sending atomically with their receive). The re-drive reads them like
the dead-letter queue, into the same target, when the management plane counts messages there."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from shared.redrive.job import run_redrive
from shared.redrive.targets import plan_entities
from tests.shared.redrive.redrive_support import drain_queue, peek_queue, redrive_env, text_properties

TDLQ = ServiceBusSubQueue.TRANSFER_DEAD_LETTER


def _queue(name: str, **counts: int) -> Any:
    return SimpleNamespace(
        name=name,
        duplicate_detection_history_time_window=None,
        max_message_size_in_kilobytes=None,
        requires_duplicate_detection=False,
        requires_session=False,
        count_details=SimpleNamespace(**counts),
    )


def test_an_entity_with_transfer_dead_letters_gets_a_plan_for_that_sub_queue_too() -> None:
    plans = plan_entities(
        [
            _queue("orders", dead_letter_message_count=1, transfer_dead_letter_message_count=2),
            _queue("billing", dead_letter_message_count=3, transfer_dead_letter_message_count=0),
        ],
        [],
    )

    assert [(p.source.path, p.transfer, p.dead_letter_count) for p in plans] == [
        ("orders", False, 1),
        ("orders", True, 2),
        ("billing", False, 3),
    ]
    assert plans[1].target == plans[0].target  # back into the queue, like its dead letters


def _transfer_dead_letter(emulator: Any, queue: str, reason: str) -> None:
    """Put the queue's one message into its transfer dead-letter queue, as a failed send-via transfer would
    (the emulator offers no send-via, so the test moves it inside the broker)."""
    namespace = emulator.emulator.namespace

    def move() -> None:
        entity = namespace.queues[queue.lower()]
        (msg,) = entity.main.messages.values()
        with namespace.store.transaction():
            entity.main._remove(msg)
            msg.set_application_properties({"DeadLetterReason": reason, "DeadLetterErrorDescription": "x"})
            sub_queue = entity.transfer_dead_letter
            sub_queue.last_sequence = max(sub_queue.last_sequence, msg.sequence_number)
            sub_queue.accept([msg])

    emulator.call(move)


def test_a_transfer_dead_letter_is_redriven_into_its_queue(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    client = ServiceBusClient.from_connection_string(emulator.connection_string)
    with client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(b"stuck", message_id="stuck-1"))
    _transfer_dead_letter(emulator, queue, "MessagingEntityDisabledException")

    summary = run_redrive(redrive_env(emulator, tmp_path, [queue]), receive_wait=0.3)

    assert summary.totals()["redriven"] == 1
    assert peek_queue(emulator.connection_string, queue, TDLQ) == []
    (copy,) = drain_queue(emulator.connection_string, queue)
    assert copy.message_id == "stuck-1"
    assert text_properties(copy)["busbar.redrive.reason"] == "MessagingEntityDisabledException"
