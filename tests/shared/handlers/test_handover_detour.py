"""The subscriber's half of a handover: a copy stamped for the endpoint's queue goes through the endpoint's
handover queue, whose duplicate detection lets one copy of a MessageId through, back to the endpoint's
queue marked as detoured (then handled); anything else is handled at once. Against the emulator, with the
SDK."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azure.servicebus import ServiceBusClient

from emulator.testing import EmulatorHandle
from functions.convert import incoming_from_received
from shared.handlers.handover_detour import detour_of, send_through_handover
from shared.messages import IncomingMessage
from shared.topology.handover import DETOURED_PROPERTY, HANDOVER_PROPERTY, handover_queue


def stamped(queues: str, **extra: object) -> IncomingMessage:
    return IncomingMessage(
        body=b"{}", message_id="m-1", application_properties={HANDOVER_PROPERTY: queues, **extra}
    )


def test_only_a_copy_stamped_for_this_queue_and_not_back_from_the_handover_queue_is_detoured() -> None:
    assert detour_of(stamped("crm;Team/Billing"), "team/billing") == "team/billing.handover"
    assert detour_of(stamped("crm"), "team/billing") is None
    assert detour_of(stamped("team/billing", **{DETOURED_PROPERTY: True}), "team/billing") is None
    assert detour_of(IncomingMessage(body=b"{}", message_id="m-2"), "team/billing") is None


def test_two_copies_of_one_message_through_the_handover_queue_come_back_once(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue(f"billing-{uuid.uuid4().hex[:8]}")
    emulator.create_queue(
        handover_queue(queue),
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(days=1),
        forward_to=queue,
    )
    properties = {HANDOVER_PROPERTY: queue, "Shipping.OrderAccepted": True, "amount": 5}
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        # The old rule's copy and the router's bridged copy: same MessageId, both stamped for billing.
        for copy in ("via the old rule", "bridged"):
            incoming = IncomingMessage(
                body=b'{"order_id": "o-1"}',
                message_id="order-1",
                application_properties={**properties, "copy": copy},
            )
            target = detour_of(incoming, queue)
            assert target == handover_queue(queue)
            assert send_through_handover(client, incoming, target)
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            back = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            back += receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in back:
                receiver.complete_message(message)
    [only] = back
    returned = incoming_from_received(only)
    assert returned.message_id == "order-1" and returned.body == b'{"order_id": "o-1"}'
    assert returned.application_properties["copy"] == "via the old rule"
    assert returned.application_properties["amount"] == 5
    assert detour_of(returned, queue) is None  # handled now: it is back from the handover queue


def test_without_its_handover_queue_the_copy_is_handled_at_once(emulator: EmulatorHandle) -> None:
    queue = f"gone-{uuid.uuid4().hex[:8]}"
    with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client:
        assert not send_through_handover(client, stamped(queue), handover_queue(queue))
