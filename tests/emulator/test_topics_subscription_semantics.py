"""Behaviour specs for receiving from subscriptions, through the real azure-servicebus SDK (sync and aio).

A subscription is a queue fed by its topic: everything receivers do on queues works on
``<topic>/Subscriptions/<name>`` and its ``$DeadLetterQueue`` too. One test each:

* peek-lock (lock, renew, complete), receive-and-delete; each subscription's copy is settled independently;
* abandon up to MaxDeliveryCount, then the subscription's dead-letter queue
  (``get_subscription_receiver(topic, sub, sub_queue=ServiceBusSubQueue.DEAD_LETTER)``);
* sessions on a session-enabled subscription (named and next-available receivers, session state); a
  message without SessionId is dead-lettered there ("Session id is null"), not refused to the publisher;
* deferral; scheduled messages sent to the topic (delivery at the scheduled time, cancellation);
* time to live: the topic's DefaultMessageTimeToLive and the subscription's both cap a message's TTL.

Entities are created directly on the shared emulator's namespace; messages only travel through the SDK.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.broker.properties import RuleConfig
from tests.emulator.sdk_helpers import (
    create_subscription,
    create_topic,
    opened,
    peek,
    receive,
    sdk_client,
    sequence_number,
)

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


DLQ = ServiceBusSubQueue.DEAD_LETTER
LOCK = timedelta(seconds=5)  # the shortest lock duration Azure accepts
WAIT = 1  # seconds a receiver waits on an empty subscription


# --------------------------------------------------------------------------------------------- helpers
#
# The SDK spends about half a second opening a link and as much closing it (its fixed idle waits), so each
# test opens all the senders and receivers it needs at once, in threads, and closes them the same way.


def _sub(
    backend: Backend, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **props: Any
) -> str:
    """``create_subscription`` with the shortest lock duration unless ``props`` set one."""
    props.setdefault("lock_duration", LOCK)
    return create_subscription(backend, topic, name, rules, **props)


# ------------------------------------------------------------------------------------------ settlement


def test_peek_lock_on_a_subscription_settles_only_that_subscriptions_copy(backend: Backend) -> None:
    topic = create_topic(backend)
    first = _sub(backend, topic, "first")
    second = _sub(backend, topic, "second")
    third = _sub(backend, topic, "third")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        first_receiver = client.get_subscription_receiver(topic, first, max_wait_time=WAIT)
        second_receiver = client.get_subscription_receiver(topic, second, max_wait_time=WAIT)
        third_receiver = client.get_subscription_receiver(
            topic, third, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=WAIT
        )
        with opened(sender, first_receiver, second_receiver, third_receiver):
            sender.send_messages(ServiceBusMessage("shared", message_id="m-1"))

            [mine] = receive(first_receiver, 1, WAIT)
            assert (str(mine), mine.message_id, mine.delivery_count) == ("shared", "m-1", 0)
            assert mine.locked_until_utc is not None
            assert mine.locked_until_utc > datetime.now(UTC) + timedelta(seconds=3)
            before = mine.locked_until_utc
            time.sleep(0.05)
            renewed = first_receiver.renew_message_lock(mine)
            assert renewed > before
            first_receiver.complete_message(mine)
            assert peek(first_receiver) == []

            # The other subscriptions' copies are untouched by the first one's settlement.
            [theirs] = receive(second_receiver, 1, WAIT)
            assert (str(theirs), theirs.delivery_count) == ("shared", 0)
            second_receiver.abandon_message(theirs)
            [again] = receive(second_receiver, 1, WAIT)
            assert again.delivery_count == 1
            assert again.sequence_number == theirs.sequence_number
            second_receiver.complete_message(again)

            [deleted] = receive(third_receiver, 1, WAIT)
            assert str(deleted) == "shared"
            assert deleted.lock_token is None
            assert peek(third_receiver) == []


@pytest.mark.also_over_arm
def test_abandon_up_to_max_delivery_count_dead_letters_in_the_subscription(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "fragile", max_delivery_count=2)
    other = _sub(backend, topic, "sturdy")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=WAIT)
        dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ, max_wait_time=WAIT)
        other_dlq = client.get_subscription_receiver(topic, other, sub_queue=DLQ)
        other_receiver = client.get_subscription_receiver(topic, other)
        with opened(sender, receiver, dlq, other_dlq, other_receiver):
            sender.send_messages(ServiceBusMessage("poison", application_properties={"attempt": "x"}))
            for expected_count in (0, 1):
                [message] = receive(receiver, 1, WAIT)
                assert message.delivery_count == expected_count
                receiver.abandon_message(message)

            assert peek(receiver) == []
            [dead] = receive(dlq, 1, WAIT)
            assert str(dead) == "poison"
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            assert dead.delivery_count is not None and dead.delivery_count >= 2
            dlq.complete_message(dead)
            assert peek(dlq) == []

            # Only this subscription's copy failed.
            assert peek(other_dlq) == []
            assert [str(m) for m in peek(other_receiver)] == ["poison"]


def test_explicit_dead_letter_from_a_subscription(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "checker")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=WAIT)
        dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(sender, receiver, dlq):
            sender.send_messages(ServiceBusMessage("invalid", subject="Order"))
            [message] = receive(receiver, 1, WAIT)
            receiver.dead_letter_message(
                message, reason="ValidationFailed", error_description="no customer id"
            )
            assert peek(receiver) == []
            [dead] = peek(dlq)
            assert (str(dead), dead.subject) == ("invalid", "Order")
            assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
                "ValidationFailed",
                "no customer id",
            )


# -------------------------------------------------------------------------------------------- sessions


@pytest.mark.also_over_arm
def test_sessions_on_a_session_enabled_subscription(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "per-wallet", requires_session=True)
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        named = client.get_subscription_receiver(topic, sub, session_id="w1", max_wait_time=WAIT)
        with opened(sender, named):
            sender.send_messages(
                [
                    ServiceBusMessage(f"{wallet}-{i}", session_id=wallet)
                    for i in range(3)
                    for wallet in ("w1", "w2")
                ]
            )
            # w1 is locked by the named receiver, so the next available session is w2.
            with client.get_subscription_receiver(
                topic, sub, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
            ) as any_other:
                assert any_other.session is not None
                assert any_other.session.session_id == "w2"
                assert [str(m) for m in receive(any_other, 3, WAIT)] == ["w2-0", "w2-1", "w2-2"]

            w1 = receive(named, 3, WAIT)
            assert [str(m) for m in w1] == ["w1-0", "w1-1", "w1-2"]
            assert {m.session_id for m in w1} == {"w1"}
            for message in w1:
                named.complete_message(message)
            assert named.session is not None
            named.session.set_state(b"balance=42")
            assert named.session.get_state() == b"balance=42"


def test_a_message_without_session_id_is_dead_lettered_in_a_session_subscription(
    backend: Backend,
) -> None:
    topic = create_topic(backend)
    sessions = _sub(backend, topic, "sessions", requires_session=True)
    plain = _sub(backend, topic, "plain")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        dlq = client.get_subscription_receiver(topic, sessions, sub_queue=DLQ)
        plain_receiver = client.get_subscription_receiver(topic, plain)
        with opened(sender, dlq, plain_receiver):
            # The topic accepts it: only the session-enabled subscription cannot hold it.
            sender.send_messages(ServiceBusMessage("no-session"))
            assert [str(m) for m in peek(plain_receiver)] == ["no-session"]
            dead = peek(dlq)
            assert [str(m) for m in dead] == ["no-session"]
            assert (dead[0].dead_letter_reason or "").lower().startswith("session id is null")
            assert "session" in (dead[0].dead_letter_error_description or "").lower()


# -------------------------------------------------------------------------------------------- deferral


def test_deferral_on_a_subscription(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "deferring")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=WAIT)
        with opened(sender, receiver):
            sender.send_messages([ServiceBusMessage("step-2"), ServiceBusMessage("step-1")])
            early, ready = receive(receiver, 2, WAIT)
            receiver.defer_message(early)
            receiver.complete_message(ready)
            # Only receivable by sequence number now.
            assert [(str(m), m.state) for m in peek(receiver)] == [
                ("step-2", ServiceBusMessageState.DEFERRED)
            ]

            [deferred] = receiver.receive_deferred_messages([sequence_number(early)])
            assert (str(deferred), deferred.sequence_number) == ("step-2", early.sequence_number)
            receiver.complete_message(deferred)
            assert peek(receiver) == []


# ------------------------------------------------------------------------------------------ scheduling


def test_a_message_scheduled_on_a_topic_reaches_subscriptions_at_its_time(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "later")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=WAIT)
        with opened(sender, receiver):
            at = datetime.now(UTC) + timedelta(seconds=1.5)
            sender.schedule_messages(ServiceBusMessage("reminder"), at)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
            received = receive(receiver, 1, WAIT) or receive(receiver, 1, WAIT)
            assert [str(m) for m in received] == ["reminder"]
            assert received[0].scheduled_enqueue_time_utc is not None
            assert abs(received[0].scheduled_enqueue_time_utc - at) < timedelta(milliseconds=5)
            assert received[0].enqueued_time_utc is not None
            assert received[0].enqueued_time_utc >= at - timedelta(milliseconds=5)
            receiver.complete_message(received[0])


def test_a_message_scheduled_on_a_topic_can_be_cancelled(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = _sub(backend, topic, "cancelled")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=WAIT)
        with opened(sender, receiver):
            at = datetime.now(UTC) + timedelta(seconds=1)
            kept, dropped = sender.schedule_messages(
                [ServiceBusMessage("kept"), ServiceBusMessage("dropped")], at
            )
            assert kept > 0
            assert dropped > 0
            assert kept != dropped
            sender.cancel_scheduled_messages(dropped)
            received = receive(receiver, 1, WAIT) or receive(receiver, 1, WAIT)
            assert [str(m) for m in received] == ["kept"]
            receiver.complete_message(received[0])
            assert peek(receiver) == []  # the cancelled one is gone for good


# ---------------------------------------------------------------------------------------- time to live


@pytest.mark.also_over_arm
def test_the_topic_and_subscription_default_ttls_cap_a_message_ttl(backend: Backend) -> None:
    topic = create_topic(backend, default_message_time_to_live=timedelta(minutes=10))
    plain = _sub(backend, topic, "plain")
    short = _sub(backend, topic, "short", default_message_time_to_live=timedelta(minutes=2))
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        plain_receiver = client.get_subscription_receiver(topic, plain)
        short_receiver = client.get_subscription_receiver(topic, short)
        with opened(sender, plain_receiver, short_receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("unset"),
                    ServiceBusMessage("one-hour", time_to_live=timedelta(hours=1)),
                    ServiceBusMessage("one-minute", time_to_live=timedelta(minutes=1)),
                ]
            )
            plain_ttls = {str(m): m.time_to_live for m in peek(plain_receiver)}
            short_ttls = {str(m): m.time_to_live for m in peek(short_receiver)}
    # A message sent without a TTL keeps its header unset (the defaults govern only its expiry).
    assert short_ttls == {
        "unset": None,
        "one-hour": timedelta(minutes=2),
        "one-minute": timedelta(minutes=1),
    }
    assert plain_ttls == {
        "unset": None,
        "one-hour": timedelta(minutes=10),
        "one-minute": timedelta(minutes=1),
    }


# ----------------------------------------------------------------------------------------------- async


def test_async_publish_and_receive_on_subscriptions(backend: Backend) -> None:
    topic = create_topic(backend)
    orders = _sub(
        backend,
        topic,
        "orders",
        [RuleConfig(name="orders", filter_type="Sql", sql_expression="kind = 'order'")],
    )
    sessions = _sub(backend, topic, "sessions", requires_session=True)

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with AsyncServiceBusClient.from_connection_string(backend.connection_string) as client:
            async with client.get_topic_sender(topic) as sender:
                await sender.send_messages(
                    [
                        ServiceBusMessage("o-1", session_id="s", application_properties={"kind": "order"}),
                        ServiceBusMessage("r-1", session_id="s", application_properties={"kind": "refund"}),
                    ]
                )
            order_receiver = client.get_subscription_receiver(topic, orders, max_wait_time=WAIT)
            session_receiver = client.get_subscription_receiver(
                topic, sessions, session_id="s", max_wait_time=WAIT
            )
            dlq = client.get_subscription_receiver(topic, orders, sub_queue=DLQ, max_wait_time=WAIT)
            receivers = (order_receiver, session_receiver, dlq)
            await asyncio.gather(*(r.__aenter__() for r in receivers))  # open the links concurrently
            try:
                got_orders = await order_receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
                for message in got_orders:
                    await order_receiver.dead_letter_message(message, reason="async-check")
                got_session = await session_receiver.receive_messages(max_message_count=2, max_wait_time=WAIT)
                for message in got_session:
                    await session_receiver.complete_message(message)
                dead = await dlq.peek_messages(max_message_count=10, sequence_number=1)
            finally:
                await asyncio.gather(*(r.close() for r in receivers))
            return [str(m) for m in got_orders], [str(m) for m in got_session], [str(m) for m in dead]

    got_orders, got_session, dead = asyncio.run(scenario())
    assert got_orders == ["o-1"]
    assert got_session == ["o-1", "r-1"]
    assert dead == ["o-1"]
