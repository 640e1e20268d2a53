"""Behaviour specs for auto-forwarding, through the real azure-servicebus SDK.

* subscription → queue, subscription → topic (routed again there), queue → queue, queue → topic;
* the forwarded message keeps its system and application properties;
* a source with ForwardTo refuses receivers on its main queue (its dead-letter queue stays readable);
* a destination must exist when the source is created;
* at most four hops: the fifth transfer fails and the message is dead-lettered, with DeadLetterReason
  ``MaxTransferHopCountExceeded``, in the entity where it stopped (the one that would have forwarded it);
* a full (``max_size_in_megabytes=1``), disabled, deleted or session-requiring destination dead-letters the
  message in the SOURCE's dead-letter queue; the destination is untouched and forwarding resumes once it
  can take messages again;
* ForwardDeadLetteredMessagesTo on subscriptions: whatever the subscription dead-letters (settlement,
  MaxDeliveryCount, a failed transfer, a failed filter) moves on to the target; DeadLetterSource is set on
  such forwarded messages only (the entity where they were dead-lettered), never on those dead-lettered
  in place.

Entities are created directly on the shared emulator's namespace with ``origin="arm"`` (so forward
targets must exist first); messages only ever travel through the SDK. Where the SDK cannot look (the
main queue of a forwarding source refuses receivers) the test reads the counts the management plane
reports (``Namespace.counts``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import ServiceBusError, ServiceBusQuotaExceededError

from emulator.broker.errors import BrokerError
from emulator.broker.properties import EntityStatus, QueueProperties, SubscriptionProperties
from tests.emulator.sdk_helpers import (
    app_properties,
    create_subscription,
    create_topic,
    opened,
    peek,
    sdk_client,
    sorted_bodies,
    sql_rule,
    unique_name,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

DLQ = ServiceBusSubQueue.DEAD_LETTER
HOPS_EXCEEDED = "MaxTransferHopCountExceeded"
# A 1 MB queue holds four of these (each just under the 256 KB message limit) and then has ~4 KB left.
FILLER = b"f" * 261_000
FORWARDED = b"m" * 16_000  # too big for what is left in a filled 1 MB queue


# --------------------------------------------------------------------------------------------- helpers
#
# The SDK spends about half a second opening a link and as much closing it (its fixed idle waits), so each
# test opens all the senders and receivers it needs at once, in threads, and closes them the same way.


def _queue(backend: Backend, name: str | None = None, **props: Any) -> str:
    return backend.create_queue(name or unique_name("q"), **props)


def _set_queue_status(emulator: EmulatorHandle, queue: str, status: EntityStatus) -> None:
    ns = emulator.emulator.namespace
    emulator.call(lambda: ns.update_queue(queue, replace(ns.queues[queue.lower()].props, status=status)))


def _counts(emulator: EmulatorHandle, entity: str, subscription: str | None = None) -> tuple[int, int]:
    """(active, dead-lettered) message counts of a queue or subscription, as the management plane reports."""
    ns = emulator.emulator.namespace

    def read() -> tuple[int, int]:
        if subscription is None:
            target: Any = ns.queues[entity.lower()]
        else:
            target = ns.topics[entity.lower()].subscriptions[subscription.lower()]
        counts = ns.counts(target)
        return counts["activeMessageCount"], counts["deadLetterMessageCount"]

    result = emulator.call(read)
    assert isinstance(result, tuple)
    return result


def _fill(sender: ServiceBusSender) -> None:
    """Fill a 1 MB queue: four near-maximal messages fit; the next would not."""
    for _ in range(4):
        sender.send_messages(ServiceBusMessage(FILLER))
    with pytest.raises(ServiceBusQuotaExceededError):
        sender.send_messages(ServiceBusMessage(FORWARDED))


# ---------------------------------------------------------------------------------------- basic chains


@pytest.mark.emulator_only
def test_subscription_forwards_to_a_queue_keeping_the_message(emulator: EmulatorHandle) -> None:
    inbox = _queue(emulator)
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "to-inbox", forward_to=inbox)
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        inbox_receiver = client.get_queue_receiver(inbox, max_wait_time=1)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(sender, inbox_receiver, sub_dlq):
            sender.send_messages(
                ServiceBusMessage(
                    "order-1",
                    message_id="m-1",
                    correlation_id="c-1",
                    subject="OrderAccepted",
                    content_type="application/json",
                    reply_to="replies",
                    to="shipping",
                    application_properties={"NServiceBus.MessageIntent": "Publish", "n": 7, "ok": True},
                )
            )
            received = inbox_receiver.receive_messages(max_message_count=5, max_wait_time=1)
            assert len(received) == 1
            message = received[0]
            assert str(message) == "order-1"
            assert (message.message_id, message.correlation_id, message.subject) == (
                "m-1",
                "c-1",
                "OrderAccepted",
            )
            assert (message.content_type, message.reply_to, message.to) == (
                "application/json",
                "replies",
                "shipping",
            )
            assert app_properties(message) == {"NServiceBus.MessageIntent": "Publish", "n": 7, "ok": True}
            assert message.delivery_count == 0
            inbox_receiver.complete_message(message)
            assert peek(sub_dlq) == []
    # Nothing stays behind in the forwarding subscription.
    assert _counts(emulator, topic, sub) == (0, 0)
    assert _counts(emulator, inbox) == (0, 0)


@pytest.mark.emulator_only
def test_subscription_forwards_to_a_topic_whose_rules_route_it_again(emulator: EmulatorHandle) -> None:
    second = create_topic(emulator)
    big = create_subscription(emulator, second, "big", [sql_rule("big", "amount >= 100")])
    small = create_subscription(emulator, second, "small", [sql_rule("small", "amount < 100")])
    first = create_topic(emulator)
    bridge = create_subscription(
        emulator, first, "bridge", [sql_rule("orders", "kind = 'order'")], forward_to=second
    )
    local = create_subscription(emulator, first, "local")
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(first)
        receivers = [client.get_subscription_receiver(second, s) for s in (big, small)]
        local_receiver = client.get_subscription_receiver(first, local)
        with opened(sender, *receivers, local_receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("order-500", application_properties={"kind": "order", "amount": 500}),
                    ServiceBusMessage("order-5", application_properties={"kind": "order", "amount": 5}),
                    ServiceBusMessage("refund-500", application_properties={"kind": "refund", "amount": 500}),
                ]
            )
            assert [sorted_bodies(peek(r)) for r in receivers] == [["order-500"], ["order-5"]]
            assert sorted_bodies(peek(local_receiver)) == ["order-5", "order-500", "refund-500"]
    assert _counts(emulator, first, bridge) == (0, 0)


@pytest.mark.emulator_only
def test_queue_forwards_to_a_queue(emulator: EmulatorHandle) -> None:
    destination = _queue(emulator)
    source = _queue(emulator, forward_to=destination)
    with sdk_client(emulator) as client:
        sender = client.get_queue_sender(source)
        receiver = client.get_queue_receiver(destination)
        source_dlq = client.get_queue_receiver(source, sub_queue=DLQ)
        with opened(sender, receiver, source_dlq):
            sender.send_messages(
                [ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(3)]
            )
            forwarded = peek(receiver)
            assert [str(m) for m in forwarded] == ["m0", "m1", "m2"]  # in order
            assert [app_properties(m)["i"] for m in forwarded] == [0, 1, 2]
            assert peek(source_dlq) == []
    assert _counts(emulator, source) == (0, 0)


@pytest.mark.emulator_only
def test_queue_forwards_to_a_topic(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    eu = create_subscription(emulator, topic, "eu", [sql_rule("eu", "region = 'eu'")])
    every = create_subscription(emulator, topic, "every")
    source = _queue(emulator, forward_to=topic)
    with sdk_client(emulator) as client:
        sender = client.get_queue_sender(source)
        receivers = [client.get_subscription_receiver(topic, s) for s in (eu, every)]
        with opened(sender, *receivers):
            sender.send_messages(
                [
                    ServiceBusMessage("eu", application_properties={"region": "eu"}),
                    ServiceBusMessage("us", application_properties={"region": "us"}),
                ]
            )
            assert [sorted_bodies(peek(r)) for r in receivers] == [["eu"], ["eu", "us"]]
    assert _counts(emulator, source) == (0, 0)


@pytest.mark.also_over_arm
def test_the_destination_still_accepts_direct_sends(backend: Backend) -> None:
    destination = _queue(backend)
    topic = create_topic(backend)
    create_subscription(backend, topic, "fwd", forward_to=destination)
    with sdk_client(backend) as client:
        topic_sender = client.get_topic_sender(topic)
        queue_sender = client.get_queue_sender(destination)
        receiver = client.get_queue_receiver(destination)
        with opened(topic_sender, queue_sender, receiver):
            topic_sender.send_messages(ServiceBusMessage("via-topic"))
            queue_sender.send_messages(ServiceBusMessage("direct"))
            assert [str(m) for m in peek(receiver)] == ["via-topic", "direct"]


# -------------------------------------------------------------------------------------------- creation


@pytest.mark.emulator_only
def test_a_forward_destination_must_exist_when_the_source_is_created(emulator: EmulatorHandle) -> None:
    ns = emulator.emulator.namespace
    topic = create_topic(emulator)
    missing = unique_name("missing")
    with pytest.raises(BrokerError) as queue_refused:
        emulator.call(
            lambda: ns.create_queue(unique_name("q"), QueueProperties(forward_to=missing), origin="arm")
        )
    assert queue_refused.value.condition == "amqp:not-found"
    assert missing in queue_refused.value.description
    with pytest.raises(BrokerError) as sub_refused:
        emulator.call(
            lambda: ns.create_subscription(
                topic,
                "s",
                SubscriptionProperties(forward_dead_lettered_messages_to=missing),
                None,
                origin="arm",
            )
        )
    assert sub_refused.value.condition == "amqp:not-found"
    assert emulator.call(lambda: len(ns.topics[topic].subscriptions)) == 0


# ------------------------------------------------------------------------------------------- receivers


def test_a_forwarding_source_refuses_receivers_but_its_dead_letter_queue_does_not(
    backend: Backend,
) -> None:
    destination = _queue(backend)
    source_queue = _queue(backend, forward_to=destination)
    topic = create_topic(backend)
    sub = create_subscription(backend, topic, "fwd", forward_to=destination)
    with sdk_client(backend, retry_total=0) as client:
        for receiver in (
            client.get_queue_receiver(source_queue, max_wait_time=1),
            client.get_subscription_receiver(topic, sub, max_wait_time=1),
        ):
            with pytest.raises(ServiceBusError) as refused, receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=1)
            assert "amqp:not-allowed" in str(refused.value)
            assert "auto-forwarding" in str(refused.value)
        queue_dlq = client.get_queue_receiver(source_queue, sub_queue=DLQ)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(queue_dlq, sub_dlq):
            assert peek(queue_dlq) == []
            assert peek(sub_dlq) == []


# ------------------------------------------------------------------------------------------- hop limit


def _queue_chain(backend: Backend, length: int) -> list[str]:
    """Queues q0 -> q1 -> ... -> q(length-1), the last one without ForwardTo; created back to front."""
    names = [unique_name(f"hop{i}") for i in range(length)]
    _queue(backend, names[-1])
    for i in range(length - 2, -1, -1):
        _queue(backend, names[i], forward_to=names[i + 1])
    return names


def test_a_four_hop_chain_delivers(backend: Backend) -> None:
    chain = _queue_chain(backend, 5)  # 4 transfers: q0->q1->q2->q3->q4
    with sdk_client(backend) as client:
        sender = client.get_queue_sender(chain[0])
        end = client.get_queue_receiver(chain[-1])
        dead_letters = [client.get_queue_receiver(q, sub_queue=DLQ) for q in chain]
        with opened(sender, end, *dead_letters):
            sender.send_messages(ServiceBusMessage("four-hops", message_id="four"))
            arrived = peek(end)
            assert [(str(m), m.message_id) for m in arrived] == [("four-hops", "four")]
            assert [peek(r) for r in dead_letters] == [[]] * len(chain)


@pytest.mark.emulator_only
def test_a_fifth_hop_dead_letters_the_message_where_it_stopped(emulator: EmulatorHandle) -> None:
    chain = _queue_chain(emulator, 6)  # 5 transfers wanted: q0->q1->q2->q3->q4->q5
    with sdk_client(emulator) as client:
        sender = client.get_queue_sender(chain[0])
        middle_sender = client.get_queue_sender(chain[2])
        end = client.get_queue_receiver(chain[-1])
        dead_letters = [client.get_queue_receiver(q, sub_queue=DLQ) for q in chain]
        with opened(sender, middle_sender, end, *dead_letters):
            sender.send_messages(
                ServiceBusMessage("five-hops", message_id="five", application_properties={"k": 1})
            )
            assert peek(end) == []
            # Four transfers happened (q0..q4); q4 could not make the fifth and dead-lettered the message.
            held = [peek(r) for r in dead_letters]
            assert [len(h) for h in held] == [0, 0, 0, 0, 1, 0]
            stopped = held[4][0]
            assert (str(stopped), stopped.message_id) == ("five-hops", "five")
            assert stopped.dead_letter_reason == HOPS_EXCEEDED
            assert stopped.dead_letter_error_description
            assert app_properties(stopped)["k"] == 1

            # The hop count belongs to the message's journey, not to the chain: three transfers are fine.
            middle_sender.send_messages(ServiceBusMessage("three-hops"))
            assert sorted_bodies(peek(end)) == ["three-hops"]
    for queue in chain[:-1]:
        assert _counts(emulator, queue)[0] == 0


# ------------------------------------------------------------------------------------ failed transfers


@pytest.mark.emulator_only
def test_a_full_destination_dead_letters_in_the_source_until_it_has_room(emulator: EmulatorHandle) -> None:
    destination = _queue(emulator, max_size_in_megabytes=1)
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "to-full", forward_to=destination)
    source_queue = _queue(emulator, forward_to=destination)
    with sdk_client(emulator) as client:
        filler = client.get_queue_sender(destination)
        topic_sender = client.get_topic_sender(topic)
        queue_sender = client.get_queue_sender(source_queue)
        destination_receiver = client.get_queue_receiver(destination, max_wait_time=1)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        queue_dlq = client.get_queue_receiver(source_queue, sub_queue=DLQ)
        with opened(filler, topic_sender, queue_sender, destination_receiver, sub_dlq, queue_dlq):
            _fill(filler)
            # The senders are not refused: the source takes the message and dead-letters it itself.
            topic_sender.send_messages(ServiceBusMessage(FORWARDED, message_id="via-sub"))
            queue_sender.send_messages(ServiceBusMessage(FORWARDED, message_id="via-queue"))

            sub_dead = peek(sub_dlq)
            queue_dead = peek(queue_dlq)
            assert [m.message_id for m in sub_dead] == ["via-sub"]
            assert [m.message_id for m in queue_dead] == ["via-queue"]
            for dead in (sub_dead[0], queue_dead[0]):
                assert dead.dead_letter_reason
                assert dead.dead_letter_reason != HOPS_EXCEEDED
            assert len(peek(destination_receiver)) == 4  # only the filler

            # Room again: later messages are forwarded; the dead-lettered ones stay where they are.
            for message in destination_receiver.receive_messages(max_message_count=4, max_wait_time=1):
                destination_receiver.complete_message(message)
            topic_sender.send_messages(ServiceBusMessage(FORWARDED, message_id="later"))
            assert [m.message_id for m in peek(destination_receiver)] == ["later"]
            assert [m.message_id for m in peek(sub_dlq)] == ["via-sub"]
    assert _counts(emulator, topic, sub) == (0, 1)


@pytest.mark.emulator_only
@pytest.mark.parametrize("status", [EntityStatus.DISABLED, EntityStatus.SEND_DISABLED])
def test_a_disabled_destination_dead_letters_in_the_source_until_re_enabled(
    emulator: EmulatorHandle, status: EntityStatus
) -> None:
    destination = _queue(emulator)
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "to-disabled", forward_to=destination)
    _set_queue_status(emulator, destination, status)
    with sdk_client(emulator) as client, client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("while-disabled"))
        assert _counts(emulator, topic, sub) == (0, 1)
        assert _counts(emulator, destination) == (0, 0)
        _set_queue_status(emulator, destination, EntityStatus.ACTIVE)
        sender.send_messages(ServiceBusMessage("after"))
        destination_receiver = client.get_queue_receiver(destination)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(destination_receiver, sub_dlq):
            assert sorted_bodies(peek(destination_receiver)) == ["after"]
            dead = peek(sub_dlq)
            assert sorted_bodies(dead) == ["while-disabled"]
            assert dead[0].dead_letter_reason


@pytest.mark.emulator_only
def test_a_receive_disabled_destination_still_takes_forwarded_messages(emulator: EmulatorHandle) -> None:
    destination = _queue(emulator, status=EntityStatus.RECEIVE_DISABLED)
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "to-receive-disabled", forward_to=destination)
    with sdk_client(emulator) as client, client.get_topic_sender(topic) as sender:
        sender.send_messages(ServiceBusMessage("parked"))
    assert _counts(emulator, destination) == (1, 0)
    assert _counts(emulator, topic, sub) == (0, 0)


@pytest.mark.emulator_only
def test_a_deleted_destination_dead_letters_in_the_source(emulator: EmulatorHandle) -> None:
    destination = _queue(emulator)
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "to-deleted", forward_to=destination)
    ns = emulator.emulator.namespace
    emulator.call(lambda: ns.delete_queue(destination))
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(sender, sub_dlq):
            sender.send_messages(ServiceBusMessage("orphan"))
            dead = peek(sub_dlq)
    assert sorted_bodies(dead) == ["orphan"]
    assert dead[0].dead_letter_reason


def test_a_session_destination_refuses_a_message_without_session_id(backend: Backend) -> None:
    destination = _queue(backend, requires_session=True)
    topic = create_topic(backend)
    sub = create_subscription(backend, topic, "to-sessions", forward_to=destination)
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        session_receiver = client.get_queue_receiver(destination, session_id="s-1")
        with opened(sender, sub_dlq, session_receiver):
            sender.send_messages(
                [ServiceBusMessage("no-session"), ServiceBusMessage("in-session", session_id="s-1")]
            )
            assert sorted_bodies(peek(sub_dlq)) == ["no-session"]
            assert sorted_bodies(peek(session_receiver)) == ["in-session"]


# ------------------------------------------------------------------------------ dead-letter forwarding


def test_forward_dead_lettered_messages_to_on_a_subscription(backend: Backend) -> None:
    errors = _queue(backend)
    topic = create_topic(backend)
    sub = create_subscription(
        backend, topic, "worker", forward_dead_lettered_messages_to=errors, max_delivery_count=1
    )
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub, max_wait_time=1)
        errors_receiver = client.get_queue_receiver(errors)
        sub_dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(sender, receiver, errors_receiver, sub_dlq):
            sender.send_messages([ServiceBusMessage("rejected"), ServiceBusMessage("poison")])
            received = {str(m): m for m in receiver.receive_messages(max_message_count=2, max_wait_time=1)}
            assert set(received) == {"rejected", "poison"}
            receiver.dead_letter_message(
                received["rejected"], reason="Invalid", error_description="no customer"
            )
            receiver.abandon_message(received["poison"])  # MaxDeliveryCount 1: straight to dead-letter

            moved = {str(m): m for m in peek(errors_receiver)}
            assert set(moved) == {"rejected", "poison"}
            rejected = moved["rejected"]
            assert (rejected.dead_letter_reason, rejected.dead_letter_error_description) == (
                "Invalid",
                "no customer",
            )
            assert moved["poison"].dead_letter_reason == "MaxDeliveryCountExceeded"
            assert peek(sub_dlq) == []


def test_failed_transfers_and_filters_are_dead_letter_forwarded_too(backend: Backend) -> None:
    errors = _queue(backend)
    full = _queue(backend, max_size_in_megabytes=1)
    topic = create_topic(backend)
    transfer = create_subscription(
        backend, topic, "transfer", forward_to=full, forward_dead_lettered_messages_to=errors
    )
    failing = create_subscription(
        backend,
        topic,
        "failing",
        [sql_rule("broken", "n / 0 = 1")],
        forward_dead_lettered_messages_to=errors,
    )
    with sdk_client(backend) as client:
        filler = client.get_queue_sender(full)
        sender = client.get_topic_sender(topic)
        errors_receiver = client.get_queue_receiver(errors)
        transfer_dlq = client.get_subscription_receiver(topic, transfer, sub_queue=DLQ)
        failing_dlq = client.get_subscription_receiver(topic, failing, sub_queue=DLQ)
        with opened(filler, sender, errors_receiver, transfer_dlq, failing_dlq):
            _fill(filler)
            sender.send_messages(
                ServiceBusMessage(FORWARDED, message_id="m-1", application_properties={"n": 1})
            )
            moved = peek(errors_receiver)
            assert sorted((m.message_id, app_properties(m)["n"]) for m in moved) == [("m-1", 1), ("m-1", 1)]
            assert all(m.dead_letter_reason for m in moved)
            assert peek(transfer_dlq) == []
            assert peek(failing_dlq) == []


@pytest.mark.emulator_only
def test_dead_letter_source_is_set_only_on_messages_forwarded_out_of_a_dead_letter_queue(
    emulator: EmulatorHandle,
) -> None:
    """DeadLetterSource: "only set in messages that have been dead-lettered and subsequently auto-forwarded
    from the dead-letter queue to another entity. Indicates the entity in which the message was
    dead-lettered." (azure-servicebus ``ServiceBusReceivedMessage.dead_letter_source``)"""
    errors = _queue(emulator)
    gone = _queue(emulator)
    topic = create_topic(emulator)
    keeps = create_subscription(emulator, topic, "keeps", [sql_rule("keeps", "target = 'keeps'")])
    forwards = create_subscription(
        emulator,
        topic,
        "forwards",
        [sql_rule("forwards", "target = 'forwards'")],
        forward_dead_lettered_messages_to=errors,
    )
    transfer = create_subscription(
        emulator, topic, "transfer", [sql_rule("transfer", "target = 'transfer'")], forward_to=gone
    )
    ns = emulator.emulator.namespace
    emulator.call(lambda: ns.delete_queue(gone))
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        keeps_receiver = client.get_subscription_receiver(topic, keeps, max_wait_time=1)
        forwards_receiver = client.get_subscription_receiver(topic, forwards, max_wait_time=1)
        keeps_dlq = client.get_subscription_receiver(topic, keeps, sub_queue=DLQ)
        transfer_dlq = client.get_subscription_receiver(topic, transfer, sub_queue=DLQ)
        errors_receiver = client.get_queue_receiver(errors)
        with opened(sender, keeps_receiver, forwards_receiver, keeps_dlq, transfer_dlq, errors_receiver):
            sender.send_messages(
                [
                    ServiceBusMessage(t, application_properties={"target": t})
                    for t in ("keeps", "forwards", "transfer")
                ]
            )
            for receiver in (keeps_receiver, forwards_receiver):
                [message] = receiver.receive_messages(max_message_count=1, max_wait_time=1)
                receiver.dead_letter_message(message, reason="Rejected")
            in_place = peek(keeps_dlq) + peek(transfer_dlq)
            forwarded = peek(errors_receiver)
    observed = {str(m): m.dead_letter_source for m in in_place + forwarded}
    assert observed == {"keeps": None, "transfer": None, "forwards": f"{topic}/Subscriptions/{forwards}"}
