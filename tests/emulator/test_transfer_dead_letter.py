"""Dead-lettering of failed auto-forward transfers, and the transfer dead-letter sub-queue.

Azure (service-bus-dead-letter-queues.md, "Dead-lettering in auto forward scenarios"): a message that passes
through more than four chained entities, or whose destination is disabled, deleted or full, is sent to the
source's dead-letter queue. The table there gives the hop limit's reason and description. A failure raised
by the destination is named, as Azure names broker-raised failures, by its exception type with its message
as the description. The transfer dead-letter queue (``$Transfer/$DeadLetterQueue``) belongs to send-via
transfers; it is a sub-queue of its own, never a second view of the dead-letter queue.
"""

from __future__ import annotations

import json
import urllib.request
from typing import TYPE_CHECKING

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from emulator.broker.properties import EntityStatus
from tests.emulator.sdk_helpers import (
    create_subscription,
    create_topic,
    opened,
    peek,
    receive,
    sdk_client,
    sql_rule,
    unique_name,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

DLQ = ServiceBusSubQueue.DEAD_LETTER
TDLQ = ServiceBusSubQueue.TRANSFER_DEAD_LETTER
HOPS_DESCRIPTION = (
    "The maximum number of allowed hops when forwarding between queues has been exceeded. "
    "This value is set to 4."
)


def test_the_transfer_dead_letter_queue_does_not_show_the_dead_letter_queue(backend: Backend) -> None:
    queue = backend.create_queue()
    with sdk_client(backend) as client:
        sender = client.get_queue_sender(queue)
        receiver = client.get_queue_receiver(queue, max_wait_time=1)
        transfer_dead_letters = client.get_queue_receiver(queue, sub_queue=TDLQ, max_wait_time=1)
        dead_letters = client.get_queue_receiver(queue, sub_queue=DLQ)
        with opened(sender, receiver, transfer_dead_letters, dead_letters):
            sender.send_messages(ServiceBusMessage("poison"))
            (message,) = receive(receiver, 1, 1)
            receiver.dead_letter_message(message, reason="Poison", error_description="bad payload")
            assert peek(transfer_dead_letters) == []
            assert transfer_dead_letters.receive_messages(max_message_count=1, max_wait_time=1) == []
            assert [str(m) for m in peek(dead_letters)] == ["poison"]


def test_a_fifth_hop_dead_letters_with_azures_reason_and_description(backend: Backend) -> None:
    names = [unique_name(f"hop{i}") for i in range(6)]
    backend.create_queue(names[-1])
    for i in range(4, -1, -1):
        backend.create_queue(names[i], forward_to=names[i + 1])
    with sdk_client(backend) as client:
        sender = client.get_queue_sender(names[0])
        dead_letters = client.get_queue_receiver(names[4], sub_queue=DLQ)
        transfer_dead_letters = client.get_queue_receiver(names[4], sub_queue=TDLQ)
        with opened(sender, dead_letters, transfer_dead_letters):
            sender.send_messages(ServiceBusMessage("five-hops"))
            (stopped,) = peek(dead_letters)
            assert peek(transfer_dead_letters) == []
    assert (stopped.dead_letter_reason, stopped.dead_letter_error_description) == (
        "MaxTransferHopCountExceeded",
        HOPS_DESCRIPTION,
    )


@pytest.mark.emulator_only
def test_a_transfer_to_a_deleted_or_disabled_destination_is_dead_lettered_with_the_destinations_error(
    emulator: EmulatorHandle,
) -> None:
    deleted, disabled = emulator.create_queue(), emulator.create_queue(status=EntityStatus.DISABLED)
    to_deleted = emulator.create_queue(forward_to=deleted)
    to_disabled = emulator.create_queue(forward_to=disabled)
    namespace = emulator.emulator.namespace
    emulator.call(lambda: namespace.delete_queue(deleted))
    with sdk_client(emulator) as client:
        senders = [client.get_queue_sender(to_deleted), client.get_queue_sender(to_disabled)]
        dead_letters = [client.get_queue_receiver(q, sub_queue=DLQ) for q in (to_deleted, to_disabled)]
        with opened(*senders, *dead_letters):
            for sender in senders:
                sender.send_messages(ServiceBusMessage("undeliverable"))
            (gone,), (off,) = (peek(receiver) for receiver in dead_letters)
    assert gone.dead_letter_reason == "MessagingEntityNotFoundException"
    assert f"{deleted}' could not be found" in (gone.dead_letter_error_description or "")
    assert off.dead_letter_reason == "MessagingEntityDisabledException"
    assert f"{disabled}' is currently disabled" in (off.dead_letter_error_description or "")


@pytest.mark.emulator_only
def test_messages_no_subscription_wanted_are_counted_in_health_details(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    create_subscription(emulator, topic, "picky", [sql_rule("only-red", "colour = 'red'")])
    with sdk_client(emulator) as client, client.get_topic_sender(topic) as sender:
        sender.send_messages(
            [
                ServiceBusMessage("blue", application_properties={"colour": "blue"}),
                ServiceBusMessage("red", application_properties={"colour": "red"}),
                ServiceBusMessage("green", application_properties={"colour": "green"}),
            ]
        )
    url = f"http://127.0.0.1:{emulator.management_port}/health/details"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "healthy"
    assert body["details"]["unmatchedTopicMessages"][topic] == 2


def test_a_message_without_session_id_reaching_a_session_subscription_has_azures_reason_and_description(
    backend: Backend,
) -> None:
    topic = create_topic(backend)
    subscription = create_subscription(backend, topic, "sessions", requires_session=True)
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        dead_letters = client.get_subscription_receiver(topic, subscription, sub_queue=DLQ)
        with opened(sender, dead_letters):
            sender.send_messages(ServiceBusMessage("no session"))
            (dead,) = peek(dead_letters)
    assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "Session ID is null.",
        "Session enabled entity doesn't allow a message whose session identifier is null.",
    )
