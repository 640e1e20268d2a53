"""Handler conditions: a handler registered ``where=...`` makes its endpoint subscribe to the event only when
its content matches; a condition that cannot work is refused at registration, and an endpoint whose handlers
would see one event under different conditions is refused when declared."""

from __future__ import annotations

import pytest

from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import IOrderStatusChanged, OrderAccepted, sample_registry
from shared.contracts import ContractError
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry
from shared.topology.content_filters import ContentFilter
from shared.topology.desired import SubscribedEvent


def _noop(event: object, context: HandlerContext) -> None:
    del event, context


def _other(event: object, context: HandlerContext) -> None:
    del event, context


def test_the_sample_sales_endpoint_subscribes_to_order_accepted_only_at_1000_or_more() -> None:
    sales = sample_catalog().get("sales")

    assert sales is not None
    assert sales.subscriptions() == [
        SubscribedEvent("Shipping.OrderAccepted", filter=ContentFilter(sql="amount >= 1000"))
    ]
    billing = sample_catalog().get("billing")
    assert billing is not None and all(s.filter is None for s in billing.subscriptions())


def test_a_condition_on_a_field_the_contract_does_not_promote_is_refused_at_registration() -> None:
    handlers = HandlerRegistry()

    with pytest.raises(ContractError, match=r"property 'order_id' at position 1 is not promoted"):
        handlers.register(OrderAccepted, _noop, where="order_id = 'o-1'")


def test_a_condition_that_does_not_parse_is_refused_at_registration_with_its_position() -> None:
    handlers = HandlerRegistry()

    with pytest.raises(ContractError, match=r"filter of Shipping.OrderAccepted: .* at position 9"):
        handlers.register(OrderAccepted, _noop, where="amount >")


def test_a_correlation_condition_is_a_mapping_of_promoted_properties() -> None:
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, _noop, where={"region": "emea"})

    endpoint = Endpoint("emea", sample_registry(), handlers)

    [subscribed] = endpoint.subscriptions()
    assert subscribed.filter == ContentFilter(properties=(("region", "emea"),))


def test_two_handlers_of_one_event_under_different_conditions_are_refused_naming_both() -> None:
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, _noop, where="amount >= 1000")
    handlers.register(OrderAccepted, _other, where={"region": "emea"})

    with pytest.raises(ContractError) as raised:
        Endpoint("mixed", sample_registry(), handlers)

    message = str(raised.value)
    assert "would receive Shipping.OrderAccepted under different conditions" in message
    assert "_noop (where 'amount >= 1000')" in message and "_other (where {'region': 'emea'})" in message
    assert "combine them with OR" in message


def test_a_filtered_handler_beside_an_unfiltered_interface_handler_of_the_same_event_is_refused() -> None:
    # The interface handler's subscription takes every OrderAccepted: the filtered handler would run on all.
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, _noop, where="amount >= 1000")
    handlers.register(IOrderStatusChanged, _other)

    with pytest.raises(ContractError, match=r"_other \(every event\)"):
        Endpoint("mixed", sample_registry(), handlers)


def test_two_handlers_under_the_same_condition_share_one_subscription() -> None:
    handlers = HandlerRegistry()
    handlers.register(OrderAccepted, _noop, where="amount >= 1000")
    handlers.register(OrderAccepted, _other, where="amount >= 1000")

    endpoint = Endpoint("twins", sample_registry(), handlers)

    assert endpoint.subscriptions() == [
        SubscribedEvent("Shipping.OrderAccepted", filter=ContentFilter(sql="amount >= 1000"))
    ]
