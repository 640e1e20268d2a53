"""What handlers publish and send leaves only after they all succeeded, over the real SDK, with the
incoming message's correlation carried over and each outgoing event's own ordering key as its SessionId."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusSender
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from app.endpoints.sample.events import CustomerUpdated, InvoiceIssued, OrderAccepted, sample_registry
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.handlers.context import HandlerContext
from shared.handlers.dispatch import Complete, Dispatcher, HandlerRegistry, Retry
from shared.handlers.outgoing import SEND_INTENT, dispatch_outgoing
from shared.messages import CONVERSATION_ID, RELATED_TO, IncomingMessage
from shared.topology import Publisher, TopologyOptions
from shared.topology.message_ids import outgoing_message_id
from shared.topology.messages import MESSAGE_ID, MESSAGE_INTENT


@pytest.fixture
def client(emulator: Any) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sdk:
        yield sdk


def test_a_sent_command_reaches_its_queue_with_send_intent_and_the_incoming_correlation(
    emulator: Any, client: ServiceBusClient
) -> None:
    queue = emulator.create_queue(f"cmd-{uuid.uuid4().hex[:10]}")
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def ask_for_invoice(event: OrderAccepted, context: HandlerContext) -> None:
        context.send(queue, InvoiceIssued(order_id=event.order_id, invoice_id="i-9"))

    incoming = IncomingMessage(
        body=OrderAccepted(order_id="o-9").model_dump_json().encode(),
        message_id="incoming-1",
        correlation_id="corr-1",
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: "Shipping.OrderAccepted", CONVERSATION_ID: "conv-1"},
    )
    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(incoming)
    assert isinstance(outcome, Complete)

    with Publisher(client, TopologyOptions(), endpoint_name="billing") as publisher:
        dispatch_outgoing(outcome, publisher, client)
    with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        [received] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(received)

    properties = {
        (k.decode() if isinstance(k, bytes) else k): v
        for k, v in (received.application_properties or {}).items()
    }
    assert received.correlation_id == "corr-1"
    assert properties[MESSAGE_INTENT] == SEND_INTENT.encode()
    assert properties[CONVERSATION_ID] == b"conv-1"
    assert properties[RELATED_TO] == b"incoming-1"
    assert properties[ENCLOSED_MESSAGE_TYPES] == b"Billing.InvoiceIssued"
    assert InvoiceIssued.model_validate_json(b"".join(received.body)) == InvoiceIssued(
        order_id="o-9", invoice_id="i-9"
    )


def order_accepted(order_id: str, session_id: str | None = None) -> IncomingMessage:
    return IncomingMessage(
        body=OrderAccepted(order_id=order_id).model_dump_json().encode(),
        message_id=f"incoming-{order_id}",
        session_id=session_id,
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: "Shipping.OrderAccepted"},
    )


def test_what_handlers_publish_and_send_carries_each_outgoing_events_own_ordering_key_as_session_id(
    emulator: Any, client: ServiceBusClient
) -> None:
    namespace = f"t{uuid.uuid4().hex[:10]}"
    topic = emulator.create_topic(f"{namespace}/Tenant.CustomerUpdated")
    emulator.create_subscription(topic, "watch")
    queue = emulator.create_queue(f"cmd-{uuid.uuid4().hex[:10]}")
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def update_customer_and_invoice(event: OrderAccepted, context: HandlerContext) -> None:
        context.publish(CustomerUpdated(customer_id="c-41", name="Ada"))
        context.send(queue, InvoiceIssued(order_id="o-invoiced", invoice_id="i-41"))

    # The incoming message's own SessionId is not what the outgoing events carry: each has its own key.
    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(order_accepted("o-41", "o-41"))
    assert isinstance(outcome, Complete)
    with Publisher(
        client, TopologyOptions(hierarchy_namespace=namespace), endpoint_name="billing"
    ) as publisher:
        dispatch_outgoing(outcome, publisher, client)

    with client.get_subscription_receiver(topic, "watch", max_wait_time=5) as receiver:
        [published] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(published)
    with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        [sent] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(sent)
    assert published.session_id == "c-41"
    assert sent.session_id == "o-invoiced"


def test_a_handler_publishing_or_sending_an_event_with_an_empty_key_fails_before_anything_is_sent() -> None:
    publishes, sends = HandlerRegistry(), HandlerRegistry()

    @publishes.handles(OrderAccepted)
    def publish_nameless(event: OrderAccepted, context: HandlerContext) -> None:
        context.publish(CustomerUpdated(customer_id="", name="Ada"))

    @sends.handles(OrderAccepted)
    def send_unkeyed(event: OrderAccepted, context: HandlerContext) -> None:
        context.send("billing", InvoiceIssued(order_id=" ", invoice_id="i-1"))

    for handlers, field in ((publishes, "customer_id"), (sends, "order_id")):
        outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(order_accepted("o-42"))

        # The handler itself failed (retried as any handler failure), so nothing it recorded is dispatched.
        assert isinstance(outcome, Retry), outcome
        assert f"ordering key field {field!r} is empty" in outcome.description


def _drain(receiver: Any) -> list[Any]:
    """Receive and complete until a receive comes back empty."""
    received: list[Any] = []
    while batch := receiver.receive_messages(max_message_count=20, max_wait_time=1):
        for message in batch:
            receiver.complete_message(message)
        received.extend(batch)
    return received


def test_the_same_incoming_message_dispatched_twice_reaches_each_destination_once(
    emulator: Any, client: ServiceBusClient
) -> None:
    """A handler retried after its outgoing messages left (the incoming message redelivered, or an outbox
    dispatching again after a crash) sends the same MessageIds: the destinations' duplicate detection drops
    the second copies (Azure: "the newly sent message is instantly ignored and dropped", pinned for the
    emulator in tests/emulator/test_duplicate_detection.py)."""
    window = timedelta(seconds=20)  # Azure's minimum; the whole test runs inside it
    namespace = f"t{uuid.uuid4().hex[:10]}"
    topic = emulator.create_topic(
        f"{namespace}/Tenant.CustomerUpdated",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=window,
    )
    emulator.create_subscription(topic, "watch")
    queue = emulator.create_queue(
        f"cmd-{uuid.uuid4().hex[:10]}",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=window,
    )
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def invoice_twice_and_update(event: OrderAccepted, context: HandlerContext) -> None:
        context.send(queue, InvoiceIssued(order_id=event.order_id, invoice_id="i-1"))
        context.publish(CustomerUpdated(customer_id="c-1", name="Ada"))
        context.send(queue, InvoiceIssued(order_id=event.order_id, invoice_id="i-2"))

    incoming = order_accepted("o-51")
    dispatcher = Dispatcher("billing", sample_registry(), handlers)
    options = TopologyOptions(hierarchy_namespace=namespace)
    with Publisher(client, options, endpoint_name="billing") as publisher:
        for _ in range(2):  # the first handling, then its retry: the handlers run again, same outcome
            outcome = dispatcher.dispatch(incoming)
            assert isinstance(outcome, Complete)
            dispatch_outgoing(outcome, publisher, client, incoming_message_id=incoming.message_id)

    with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        sent = _drain(receiver)
    with client.get_subscription_receiver(topic, "watch", max_wait_time=5) as receiver:
        published = _drain(receiver)
    assert sorted(InvoiceIssued.model_validate_json(b"".join(m.body)).invoice_id for m in sent) == [
        "i-1",
        "i-2",
    ]
    assert len(published) == 1
    # Position 0 and 2 of billing's outgoing messages for o-51, position 1 the published event.
    expected = [outgoing_message_id("billing", incoming.message_id or "", p) for p in range(3)]
    assert sorted(m.message_id for m in sent) == sorted([expected[0], expected[2]])
    assert published[0].message_id == expected[1]
    assert all(
        (m.application_properties or {})[MESSAGE_ID.encode()] == m.message_id.encode()
        for m in sent + published
    )


def test_two_different_incoming_messages_publish_under_different_ids(
    emulator: Any, client: ServiceBusClient
) -> None:
    """The ids are per incoming message: the same outgoing message caused by two messages is two messages."""
    queue = emulator.create_queue(
        f"cmd-{uuid.uuid4().hex[:10]}",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(seconds=20),
    )
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def invoice(event: OrderAccepted, context: HandlerContext) -> None:
        context.send(queue, InvoiceIssued(order_id="same", invoice_id="i-1"))

    dispatcher = Dispatcher("billing", sample_registry(), handlers)
    with Publisher(client, TopologyOptions(), endpoint_name="billing") as publisher:
        for incoming in (order_accepted("o-61"), order_accepted("o-62")):
            outcome = dispatcher.dispatch(incoming)
            assert isinstance(outcome, Complete)
            dispatch_outgoing(outcome, publisher, client, incoming_message_id=incoming.message_id)

    with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        assert len(_drain(receiver)) == 2


class SenderCountingClient(ServiceBusClient):
    """The real client, noting each queue sender asked for (through the public API only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue_senders: list[str] = []

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> ServiceBusSender:
        self.queue_senders.append(queue_name)
        return super().get_queue_sender(queue_name, **kwargs)


def test_the_commands_of_one_outcome_go_in_order_through_one_sender_per_destination_queue(
    emulator: Any,
) -> None:
    first = emulator.create_queue(f"cmd-{uuid.uuid4().hex[:10]}")
    second = emulator.create_queue(f"cmd-{uuid.uuid4().hex[:10]}")
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def invoice_everywhere(event: OrderAccepted, context: HandlerContext) -> None:
        context.send(first, InvoiceIssued(order_id=event.order_id, invoice_id="i-1"))
        context.send(first, InvoiceIssued(order_id=event.order_id, invoice_id="i-2"))
        context.send(second, InvoiceIssued(order_id=event.order_id, invoice_id="i-3"))
        # Another spelling of the first queue's name: Service Bus names ignore case, so the same queue.
        context.send(first.upper(), InvoiceIssued(order_id=event.order_id, invoice_id="i-4"))

    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(order_accepted("o-61"))
    assert isinstance(outcome, Complete)
    with SenderCountingClient.from_connection_string(emulator.connection_string) as client:
        assert isinstance(client, SenderCountingClient)
        with Publisher(client, TopologyOptions(), endpoint_name="billing") as publisher:
            dispatch_outgoing(outcome, publisher, client)
        with client.get_queue_receiver(first, max_wait_time=5) as receiver:
            to_first = _drain(receiver)
        with client.get_queue_receiver(second, max_wait_time=5) as receiver:
            to_second = _drain(receiver)

    assert client.queue_senders == [first, second]
    invoices = [
        [InvoiceIssued.model_validate_json(b"".join(m.body)).invoice_id for m in q]
        for q in (to_first, to_second)
    ]
    assert invoices == [["i-1", "i-2", "i-4"], ["i-3"]]


def test_a_command_to_a_missing_queue_raises_after_the_commands_before_it_left(emulator: Any) -> None:
    queue = emulator.create_queue(f"cmd-{uuid.uuid4().hex[:10]}")
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def invoice_then_lose(event: OrderAccepted, context: HandlerContext) -> None:
        context.send(queue, InvoiceIssued(order_id=event.order_id, invoice_id="i-1"))
        context.send(missing, InvoiceIssued(order_id=event.order_id, invoice_id="i-2"))

    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(order_accepted("o-62"))
    assert isinstance(outcome, Complete)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with (
            Publisher(client, TopologyOptions(), endpoint_name="billing") as publisher,
            # A missing entity's token is refused (404; pinned in tests/emulator/test_arm_entities.py).
            pytest.raises(ServiceBusAuthenticationError),
        ):
            dispatch_outgoing(outcome, publisher, client)
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            sent = _drain(receiver)

    assert [InvoiceIssued.model_validate_json(b"".join(m.body)).invoice_id for m in sent] == ["i-1"]
