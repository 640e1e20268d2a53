"""Dispatch: type resolution, polymorphic handlers, validation and outcome classification."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from app.endpoints.sample.events import (
    CustomerCreated,
    InvoiceIssued,
    IOrderAccepted,
    IOrderStatusChanged,
    OrderAccepted,
    OrderDeclined,
    sample_registry,
)
from shared.contracts import ENCLOSED_MESSAGE_TYPES, ContractRegistry, Event, enclosed_types_header
from shared.handlers.context import HandlerContext, OutgoingPublish, OutgoingSend
from shared.handlers.dispatch import (
    MAX_DEAD_LETTER_TEXT,
    NO_HANDLER,
    PAYLOAD_VALIDATION_FAILED,
    PERMANENT_HANDLER_ERROR,
    UNKNOWN_MESSAGE_TYPE,
    UNSUPPORTED_CONTENT_TYPE,
    Complete,
    DeadLetter,
    Dispatcher,
    HandlerRegistry,
    PermanentHandlerError,
    Retry,
)
from shared.messages import CONVERSATION_ID, RELATED_TO, IncomingMessage


def message_for(event: Event, **overrides: Any) -> IncomingMessage:
    fields: dict[str, Any] = {
        "body": event.model_dump_json().encode(),
        "message_id": uuid.uuid4().hex,
        "content_type": "application/json",
        "application_properties": {ENCLOSED_MESSAGE_TYPES: enclosed_types_header(type(event))},
    }
    fields.update(overrides)
    return IncomingMessage(**fields)


def raw_message(body: bytes, header: str | None, **overrides: Any) -> IncomingMessage:
    properties = {} if header is None else {ENCLOSED_MESSAGE_TYPES: header}
    return IncomingMessage(
        body=body,
        message_id="m-1",
        content_type="application/json",
        application_properties=properties,
        **overrides,
    )


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Event]] = []

    def handler(self, label: str) -> Any:
        def handle(event: Event, context: HandlerContext) -> None:
            self.calls.append((label, event))

        handle.__qualname__ = label
        return handle


def test_a_handler_for_an_interface_receives_every_implementer() -> None:
    seen = Seen()
    handlers = HandlerRegistry()
    handlers.register(IOrderStatusChanged, seen.handler("status"))
    dispatcher = Dispatcher("crm", sample_registry(), handlers)

    for event in (OrderAccepted(order_id="o1", amount=3), OrderDeclined(order_id="o2", reason="stock")):
        outcome = dispatcher.dispatch(message_for(event))
        assert isinstance(outcome, Complete)
        assert outcome.event_type == event.contract_name

    assert [(label, type(e)) for label, e in seen.calls] == [
        ("status", OrderAccepted),
        ("status", OrderDeclined),
    ]
    assert seen.calls[1][1] == OrderDeclined(order_id="o2", reason="stock")


def test_every_matching_handler_runs_once_in_registration_order() -> None:
    seen = Seen()
    handlers = HandlerRegistry()
    both = seen.handler("both")
    handlers.register(OrderAccepted, seen.handler("concrete"))
    handlers.register(IOrderAccepted, both)
    handlers.register(IOrderStatusChanged, both)  # registered twice: still called once
    handlers.register(CustomerCreated, seen.handler("customer"))

    outcome = Dispatcher("e", sample_registry(), handlers).dispatch(message_for(OrderAccepted(order_id="o")))

    assert isinstance(outcome, Complete)
    assert [label for label, _ in seen.calls] == ["concrete", "both"]
    assert len(outcome.handlers) == 2


def test_an_unknown_concrete_type_is_handled_through_a_known_interface() -> None:
    seen = Seen()
    handlers = HandlerRegistry()
    handlers.register(IOrderAccepted, seen.handler("accepted"))
    header = "Shipping.OrderAcceptedV9, Shared, Version=9.0.0.0;Shipping.IOrderAccepted, Shared"
    body = json.dumps({"order_id": "o9", "amount": 1, "brand_new_field": True}).encode()

    outcome = Dispatcher("e", sample_registry(), handlers).dispatch(raw_message(body, header))

    assert isinstance(outcome, Complete)
    assert outcome.event_type == "Shipping.IOrderAccepted"
    assert [type(e) for _, e in seen.calls] == [IOrderAccepted]
    event = seen.calls[0][1]
    assert isinstance(event, IOrderAccepted)  # narrows Event for the type checker; checked just above
    assert event.order_id == "o9"


def test_a_payload_that_does_not_validate_is_dead_lettered_with_every_pydantic_error() -> None:
    handlers = HandlerRegistry()
    handlers.register(InvoiceIssued, Seen().handler("h"))
    body = json.dumps({"amount": "lots"}).encode()

    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(
        raw_message(body, "Billing.InvoiceIssued")
    )

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == PAYLOAD_VALIDATION_FAILED
    assert "Billing.InvoiceIssued" in outcome.description
    assert "3 error(s)" in outcome.description
    for problem in ("order_id: Field required", "invoice_id: Field required", "amount: Input should be"):
        assert problem in outcome.description


def test_a_body_that_is_not_json_is_dead_lettered_as_invalid_payload() -> None:
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, Seen().handler("h"))

    outcome = Dispatcher("e", sample_registry(), handlers).dispatch(
        raw_message(b"\xff not json", "Shipping.OrderAccepted")
    )

    assert isinstance(outcome, DeadLetter)  # narrows the outcome union; the equality below implies it
    assert outcome == DeadLetter(PAYLOAD_VALIDATION_FAILED, outcome.description)
    assert "Invalid JSON" in outcome.description


def test_a_message_without_the_enclosed_types_header_is_an_unknown_type() -> None:
    outcome = Dispatcher("e", sample_registry(), HandlerRegistry()).dispatch(raw_message(b"{}", None))

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == UNKNOWN_MESSAGE_TYPE
    assert "NServiceBus.EnclosedMessageTypes" in outcome.description


def test_a_type_no_contract_matches_is_an_unknown_type_naming_the_types() -> None:
    outcome = Dispatcher("crm", sample_registry(), HandlerRegistry()).dispatch(
        raw_message(b"{}", "Sales.OrderPlaced, Sales;Sales.IOrderEvent")
    )

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == UNKNOWN_MESSAGE_TYPE
    assert "['Sales.OrderPlaced', 'Sales.IOrderEvent']" in outcome.description
    assert "'crm'" in outcome.description


def test_a_known_type_without_a_handler_here_is_dead_lettered_as_no_handler() -> None:
    handlers = HandlerRegistry()
    handlers.register(CustomerCreated, Seen().handler("h"))

    outcome = Dispatcher("crm", sample_registry(), handlers).dispatch(
        message_for(OrderAccepted(order_id="o"))
    )

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == NO_HANDLER
    assert "'Shipping.OrderAccepted'" in outcome.description
    assert "Tenant.CustomerCreated" in outcome.description


def test_a_non_json_content_type_is_dead_lettered() -> None:
    outcome = Dispatcher("e", sample_registry(), HandlerRegistry()).dispatch(
        message_for(OrderAccepted(order_id="o"), content_type="application/xml")
    )

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == UNSUPPORTED_CONTENT_TYPE
    assert "application/xml" in outcome.description


def test_a_permanent_handler_error_is_dead_lettered_and_later_handlers_do_not_run() -> None:
    seen = Seen()
    handlers = HandlerRegistry()

    def refuse(event: OrderAccepted, context: HandlerContext) -> None:
        raise PermanentHandlerError("order o is closed")

    handlers.register(OrderAccepted, refuse)
    handlers.register(OrderAccepted, seen.handler("later"))

    outcome = Dispatcher("e", sample_registry(), handlers).dispatch(message_for(OrderAccepted(order_id="o")))

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == PERMANENT_HANDLER_ERROR
    assert "refuse" in outcome.description and "order o is closed" in outcome.description
    assert seen.calls == []


def test_any_other_handler_exception_is_left_to_the_broker_to_retry() -> None:
    handlers = HandlerRegistry()

    def flaky(event: OrderAccepted, context: HandlerContext) -> None:
        context.publish(InvoiceIssued(order_id="o", invoice_id="i"))
        raise TimeoutError("database busy")

    handlers.register(OrderAccepted, flaky)

    outcome = Dispatcher("e", sample_registry(), handlers).dispatch(message_for(OrderAccepted(order_id="o")))

    assert isinstance(outcome, Retry)
    assert isinstance(outcome.error, TimeoutError)
    assert "flaky raised TimeoutError: database busy" in outcome.description


def test_dead_letter_texts_are_truncated_to_the_service_bus_limit() -> None:
    outcome = DeadLetter("R" * 5000, "D" * 10_000)

    assert len(outcome.reason) == MAX_DEAD_LETTER_TEXT
    assert len(outcome.description) == MAX_DEAD_LETTER_TEXT
    assert outcome.description.endswith("...")


def test_what_handlers_publish_and_send_is_returned_with_correlation_carried_over() -> None:
    handlers = HandlerRegistry()

    @handlers.handles(OrderAccepted)
    def invoice(event: OrderAccepted, context: HandlerContext) -> None:
        context.publish(InvoiceIssued(order_id=event.order_id, invoice_id="i-1"))
        context.send("shipping", InvoiceIssued(order_id=event.order_id, invoice_id="i-1"))

    message = message_for(
        OrderAccepted(order_id="o"),
        message_id="in-1",
        correlation_id="corr-7",
        application_properties={
            ENCLOSED_MESSAGE_TYPES: "Shipping.OrderAccepted",
            CONVERSATION_ID: "conv-3",
        },
    )
    outcome = Dispatcher("billing", sample_registry(), handlers).dispatch(message)

    assert isinstance(outcome, Complete)
    invoice_event = InvoiceIssued(order_id="o", invoice_id="i-1")
    assert outcome.outgoing == (OutgoingPublish(invoice_event), OutgoingSend("shipping", invoice_event))
    context = HandlerContext(message, "billing")
    assert context.correlation_id == "corr-7"
    assert context.outgoing_headers() == {CONVERSATION_ID: "conv-3", RELATED_TO: "in-1"}


def test_without_incoming_correlation_the_incoming_message_id_starts_the_conversation() -> None:
    context = HandlerContext(message_for(OrderAccepted(order_id="o"), message_id="first"), "billing")

    assert context.correlation_id == "first"
    assert context.outgoing_headers() == {CONVERSATION_ID: "first", RELATED_TO: "first"}


def test_handlers_cannot_publish_an_interface() -> None:
    context = HandlerContext(message_for(OrderAccepted(order_id="o")), "billing")

    with pytest.raises(ValueError, match="abstract contract"):
        context.publish(IOrderAccepted(order_id="o"))


def test_registering_a_class_without_a_contract_name_is_refused() -> None:
    class Nameless(Event):
        x: int = 0

    with pytest.raises(ValueError, match="no contract name"):
        HandlerRegistry().register(Nameless, Seen().handler("h"))


def test_subscribed_contracts_are_the_handled_ones_in_first_registration_order() -> None:
    handlers = HandlerRegistry()
    handlers.register(IOrderStatusChanged, Seen().handler("a"))
    handlers.register(CustomerCreated, Seen().handler("b"))
    handlers.register(IOrderStatusChanged, Seen().handler("c"))

    assert handlers.handled_contracts() == ["Shipping.IOrderStatusChanged", "Tenant.CustomerCreated"]


def test_a_registry_without_the_type_reports_unknown_even_if_a_handler_exists_elsewhere() -> None:
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, Seen().handler("h"))

    outcome = Dispatcher("e", ContractRegistry(CustomerCreated), handlers).dispatch(
        message_for(OrderAccepted(order_id="o"))
    )

    assert isinstance(outcome, DeadLetter)
    assert outcome.reason == UNKNOWN_MESSAGE_TYPE
