"""What handlers publish and send leaves only after they all succeeded, over the real SDK, with the
incoming message's correlation carried over and each outgoing event's own ordering key as its SessionId."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from app.sample_events import CustomerUpdated, InvoiceIssued, OrderAccepted, sample_registry
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.handlers.context import HandlerContext
from shared.handlers.dispatch import Complete, Dispatcher, HandlerRegistry, Retry
from shared.handlers.outgoing import SEND_INTENT, dispatch_outgoing
from shared.messages import CONVERSATION_ID, RELATED_TO, IncomingMessage
from shared.topology import Publisher, TopologyOptions
from shared.topology.messages import MESSAGE_INTENT


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
