"""The "Verify" checks of seed 004 (a Service Bus reliability guide), run against the emulator through the
real azure-servicebus SDK, scaled down in time:

* Lock renewal: "run a handler that sleeps 90s with a 60s LockDuration and MaxAutoLockRenewalDuration = 10m;
  assert no redelivery (delivery count stays 1)". Here: 5 s lock, 8 s handler. .NET counts deliveries from 1;
  the Python SDK shows the AMQP header's delivery-count, 0 on the first delivery.
* DLQ: "force a handler exception 11 times (MaxDeliveryCount = 10); assert the message appears under
  $DeadLetterQueue with reason MaxDeliveryCountExceeded". Here the handler fails by abandoning, and the test
  counts the deliveries: exactly 10, then the message is dead-lettered.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from azure.servicebus import AutoLockRenewer, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

WAIT = 0.5  # seconds a receiver waits on an empty queue (local deliveries take milliseconds)


def test_slow_handler_with_auto_lock_renewal_is_not_redelivered(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(seconds=5))
    renew_failures: list[Any] = []

    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("order-42", message_id="order-42"))

        with (
            client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver,
            AutoLockRenewer(
                max_lock_renewal_duration=50, on_lock_renew_failure=lambda *a: renew_failures.append(a)
            ) as renewer,
        ):
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            first_lock_expiry = message.locked_until_utc
            renewer.register(receiver, message)
            assert message.delivery_count == 0

            handler_started = time.monotonic()
            # While the 8 s "handler" runs, a competing consumer must not be handed the message.
            with client.get_queue_receiver(queue, max_wait_time=WAIT) as competitor:
                stolen = competitor.receive_messages(max_message_count=1, max_wait_time=5)
            time.sleep(max(0.0, 8 - (time.monotonic() - handler_started)))
            # The broker's own view, past the lock duration: still one delivery, still locked.
            (in_flight,) = receiver.peek_messages(max_message_count=10, sequence_number=1)
            renewed_lock_expiry = message.locked_until_utc

            receiver.complete_message(message)  # would raise MessageLockLostError had the lock lapsed
            left = receiver.peek_messages(max_message_count=10, sequence_number=1)

    assert stolen == []
    assert renew_failures == []
    assert in_flight.delivery_count == 0
    assert first_lock_expiry is not None
    assert renewed_lock_expiry is not None
    assert renewed_lock_expiry > first_lock_expiry + timedelta(seconds=2)
    assert left == []


def test_repeatedly_failing_message_is_dead_lettered_after_exactly_max_delivery_count_deliveries(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue(max_delivery_count=10)

    deliveries: list[int | None] = []
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("poison", message_id="poison-1"))

        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            for _attempt in range(11):  # the handler would fail an 11th time if it got the chance
                batch = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
                if not batch:
                    break
                (message,) = batch
                assert message.message_id == "poison-1"
                deliveries.append(message.delivery_count)
                receiver.abandon_message(message)  # the handler throws

        with client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT
        ) as dlq:
            dead = dlq.receive_messages(max_message_count=2, max_wait_time=WAIT)
            for message in dead:
                dlq.complete_message(message)

    assert deliveries == list(range(10))  # exactly 10 deliveries, counted 0..9 by the Python SDK
    assert len(dead) == 1
    assert dead[0].message_id == "poison-1"
    assert str(dead[0]) == "poison"
    assert dead[0].dead_letter_reason == "MaxDeliveryCountExceeded"
