"""What handlers publish and send leaves only after they all succeeded, over the real SDK, with the
incoming message's correlation carried over."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from app.sample_events import InvoiceIssued, OrderAccepted, sample_registry
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.handlers.context import HandlerContext
from shared.handlers.dispatch import Complete, Dispatcher, HandlerRegistry
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
