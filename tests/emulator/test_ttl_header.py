"""The time to live a receiver sees, and the expiry the entity default still enforces.

Azure (message-expiration.md, "Entity-level expiration"): "The default expiration is used for all messages
sent to the entity where TimeToLive is not explicitly set. The default expiration also functions as a
ceiling for the TimeToLive value. Messages that have a longer TimeToLive expiration than the default value
are silently adjusted to the defaultMessageTimeToLive value before being enqueued."

So a message sent without a TTL keeps its header TTL unset (``time_to_live is None``) while the default
governs when it expires, and a message sent with a longer TTL reports the adjusted one.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from tests.emulator.sdk_helpers import create_subscription, create_topic, opened, peek, receive, sdk_client

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


WAIT = 1


def test_a_message_sent_without_a_ttl_reports_none_but_expires_at_the_queue_default(
    backend: Backend,
) -> None:
    queue = backend.create_queue(
        default_message_time_to_live=timedelta(seconds=2), dead_lettering_on_message_expiration=True
    )
    with sdk_client(backend) as client:
        sender = client.get_queue_sender(queue)
        receiver = client.get_queue_receiver(queue, max_wait_time=WAIT)
        dead_letters = client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
        with opened(sender, receiver, dead_letters):
            sent_at = time.monotonic()
            sender.send_messages(
                [ServiceBusMessage("no ttl"), ServiceBusMessage("long", time_to_live=timedelta(days=30))]
            )
            fresh = peek(receiver)
            time.sleep(max(0.0, 3 - (time.monotonic() - sent_at)))
            assert receiver.receive_messages(max_message_count=2, max_wait_time=WAIT) == []
            expired = receive(dead_letters, 2, WAIT)
            for message in expired:
                dead_letters.complete_message(message)
    assert [(str(m), m.time_to_live) for m in fresh] == [
        ("no ttl", None),
        ("long", timedelta(seconds=2)),  # silently adjusted to the default, and reported so
    ]
    assert [(str(m), m.time_to_live, m.dead_letter_reason) for m in expired] == [
        ("no ttl", None, "TTLExpiredException"),
        ("long", timedelta(seconds=2), "TTLExpiredException"),
    ]


def test_a_message_without_a_ttl_published_to_a_topic_keeps_no_ttl_but_expires_at_the_topic_default(
    backend: Backend,
) -> None:
    topic = create_topic(backend, default_message_time_to_live=timedelta(seconds=2))
    subscription = create_subscription(backend, topic, "all", default_message_time_to_live=timedelta(days=14))
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, subscription, max_wait_time=WAIT)
        with opened(sender, receiver):
            sent_at = time.monotonic()
            sender.send_messages(ServiceBusMessage("no ttl"))
            (fresh,) = peek(receiver)
            time.sleep(max(0.0, 3 - (time.monotonic() - sent_at)))
            # The topic's shorter default governs the copy in a subscription whose own default is longer.
            assert receiver.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
    assert fresh.time_to_live is None
