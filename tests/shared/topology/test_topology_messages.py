"""The outgoing message: NServiceBus headers, JSON body, and correlation stamps per routing mode."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from app.endpoints.sample.events import OrderAccepted, OrderAcceptedV2
from shared.contracts import ENCLOSED_MESSAGE_TYPES, Event
from shared.topology import TopicRoutingMode, build_message, correlation_stamps, publish_headers
from shared.topology.messages import MESSAGE_ID

MOMENT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _props(message: object) -> dict[str, object]:
    return dict(message.application_properties or {})  # type: ignore[attr-defined]


def test_headers_carry_the_nservicebus_identity_of_a_publish() -> None:
    headers = publish_headers(
        OrderAccepted(order_id="1"), endpoint_name="shipping", message_id="m-1", now=MOMENT
    )
    assert headers["NServiceBus.MessageId"] == "m-1"
    assert headers["NServiceBus.MessageIntent"] == "Publish"
    assert headers["NServiceBus.ContentType"] == "application/json"
    assert (
        headers[ENCLOSED_MESSAGE_TYPES]
        == "Shipping.OrderAccepted;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged"
    )
    assert headers["NServiceBus.TimeSent"] == "2026-01-02 03:04:05:678901 Z"
    assert headers["NServiceBus.OriginatingEndpoint"] == "shipping"
    # A new conversation: the correlation id is the message id; the conversation id is fresh.
    assert headers["NServiceBus.CorrelationId"] == "m-1"
    assert headers["NServiceBus.ConversationId"] not in ("", "m-1")


def test_caller_headers_pass_through_but_cannot_override_the_identity_headers() -> None:
    headers = publish_headers(
        OrderAccepted(order_id="1"),
        endpoint_name="shipping",
        correlation_id="c-1",
        conversation_id="v-1",
        headers={"Tenant": "t1", ENCLOSED_MESSAGE_TYPES: "Lies", "NServiceBus.MessageIntent": "Send"},
    )
    assert headers["Tenant"] == "t1"
    assert headers[ENCLOSED_MESSAGE_TYPES].startswith("Shipping.OrderAccepted;")
    assert headers["NServiceBus.MessageIntent"] == "Publish"
    assert (headers["NServiceBus.CorrelationId"], headers["NServiceBus.ConversationId"]) == ("c-1", "v-1")


def test_correlation_filter_mode_stamps_every_enclosed_type_as_boolean_true() -> None:
    message = build_message(
        OrderAcceptedV2(order_id="1"), TopicRoutingMode.CorrelationFilter, endpoint_name="s"
    )
    props = _props(message)
    for name in ("Shipping.OrderAcceptedV2", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"):
        assert props[name] is True


def test_sql_and_not_multiplexed_modes_stamp_nothing_extra() -> None:
    for mode in (TopicRoutingMode.SqlLikeFilter, TopicRoutingMode.NotMultiplexed):
        props = _props(build_message(OrderAccepted(order_id="1"), mode, endpoint_name="s"))
        assert "Shipping.OrderAccepted" not in props
        assert ENCLOSED_MESSAGE_TYPES in props


def test_the_message_has_a_json_body_promoted_properties_and_its_message_id_as_the_broker_one() -> None:
    message = build_message(
        OrderAccepted(order_id="1", amount=9.5),
        TopicRoutingMode.NotMultiplexed,
        endpoint_name="s",
        message_id="m-1",
    )
    assert json.loads(str(message)) == {"order_id": "1", "amount": 9.5, "region": ""}
    assert message.content_type == "application/json"
    assert message.correlation_id == "m-1"
    # Unlike NServiceBus's transport (a fresh native GUID per send): the broker's duplicate detection must
    # see the deterministic id, so a retried send is dropped.
    assert message.message_id == "m-1" == _props(message)[MESSAGE_ID]


def test_without_a_message_id_each_message_gets_a_fresh_one_on_the_broker_and_in_its_header() -> None:
    first, second = (
        build_message(OrderAccepted(order_id="1"), TopicRoutingMode.NotMultiplexed, endpoint_name="s")
        for _ in range(2)
    )
    assert first.message_id == _props(first)[MESSAGE_ID]
    assert first.message_id != second.message_id


def test_stamps_come_from_the_parsed_header_including_assembly_qualified_names() -> None:
    assert correlation_stamps("Ns.A, Asm, Version=1.0.0.0; Ns.B__impl ;Ns.C") == {"Ns.A": True, "Ns.C": True}


def test_the_contracts_promoted_fields_go_out_as_typed_application_properties_in_every_routing_mode() -> None:
    for mode in TopicRoutingMode:
        props = _props(
            build_message(OrderAccepted(order_id="1", amount=5000, region="emea"), mode, endpoint_name="s")
        )
        assert props["amount"] == 5000.0 and isinstance(props["amount"], float)
        assert props["region"] == "emea"


def test_an_integer_field_is_given_to_the_sdk_as_a_long_not_as_a_32_bit_int() -> None:
    class Counted(Event, contract="Tests.Messages.Counted", promoted=("count",)):
        count: int

    # The SDK sends a plain int as a 32-bit int (and refuses one past 2**31): a long must be marked as one.
    props = _props(build_message(Counted(count=2**40), TopicRoutingMode.NotMultiplexed, endpoint_name="s"))
    assert props["count"] == {"TYPE": "LONG", "VALUE": 2**40}
