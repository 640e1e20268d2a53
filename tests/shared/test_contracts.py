"""Event contracts: names, the polymorphic enclosed-types header, parsing it as NServiceBus does, and the
registry."""

from __future__ import annotations

import pytest

from app.endpoints.sample.events import (
    SAMPLE_EVENTS,
    CustomerCreated,
    ICustomerLifecycleEvent,
    IOrderAccepted,
    IOrderStatusChanged,
    OrderAccepted,
    OrderAcceptedV2,
    OrderDeclined,
    sample_registry,
)
from shared.contracts import (
    ContractError,
    Event,
    enclosed_types,
    enclosed_types_header,
    parse_enclosed_types,
)


def test_enclosed_types_list_the_concrete_type_first_then_its_contracts_in_mro_order() -> None:
    assert enclosed_types(OrderAccepted) == [
        "Shipping.OrderAccepted",
        "Shipping.IOrderAccepted",
        "Shipping.IOrderStatusChanged",
    ]
    assert enclosed_types_header(OrderAcceptedV2) == (
        "Shipping.OrderAcceptedV2;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged"
    )


def test_interfaces_are_abstract_and_concrete_events_are_not() -> None:
    assert (
        IOrderAccepted.is_abstract and IOrderStatusChanged.is_abstract and ICustomerLifecycleEvent.is_abstract
    )
    assert not OrderAccepted.is_abstract and not CustomerCreated.is_abstract
    assert Event.is_abstract


def test_a_helper_base_without_a_contract_adds_no_name_to_the_enclosed_types() -> None:
    class Audited(Event):
        who: str = ""

    class Thing(Audited, contract="Tests.Thing"):
        pass

    assert enclosed_types(Thing) == ["Tests.Thing"]
    assert Audited.is_abstract


@pytest.mark.parametrize("name", ["", " Padded", "A;B", "A,B", "x" * 261])
def test_a_contract_name_that_cannot_travel_in_the_header_or_as_a_topic_is_refused(name: str) -> None:
    with pytest.raises(ContractError):

        class Bad(Event, contract=name):
            pass


def test_parsing_strips_assembly_qualification_and_keeps_nested_type_names() -> None:
    header = (
        "Shipping.OrderAccepted, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ;"
        "Shipping.IOrderAccepted, Shared, Version=1.0.0.0;Outer+Inner, Shared"
    )
    assert parse_enclosed_types(header) == [
        "Shipping.OrderAccepted",
        "Shipping.IOrderAccepted",
        "Outer+Inner",
    ]


def test_parsing_drops_proxy_impl_entries_and_empty_entries_and_trims_whitespace() -> None:
    assert parse_enclosed_types("  A.B ;; A.C__impl, Proxy ; ;A.D") == ["A.B", "A.D"]


def test_parsing_cuts_generic_names_after_the_last_bracket() -> None:
    header = (
        "Ns.Generic`1[[System.String, mscorlib, Version=4.0.0.0]], Shared, Version=1.0.0.0;Ns.Other, Shared"
    )
    assert parse_enclosed_types(header) == [
        "Ns.Generic`1[[System.String, mscorlib, Version=4.0.0.0]]",
        "Ns.Other",
    ]


def test_busbar_header_round_trips_through_the_parser() -> None:
    for event_type in SAMPLE_EVENTS:
        assert parse_enclosed_types(enclosed_types_header(event_type)) == enclosed_types(event_type)


def test_registry_resolves_concrete_events_and_their_interfaces() -> None:
    registry = sample_registry()
    assert registry.resolve("Shipping.OrderDeclined") is OrderDeclined
    assert registry.resolve("Shipping.IOrderStatusChanged") is IOrderStatusChanged
    assert [c.contract_name for c in registry.implementers("Shipping.IOrderAccepted")] == [
        "Shipping.OrderAccepted",
        "Shipping.OrderAcceptedV2",
        "Shipping.OrderDeclined",
    ]
    assert "Tenant.ICustomerLifecycleEvent" in registry
    assert registry.get("Nope") is None
    with pytest.raises(ContractError, match="unknown contract type 'Nope'"):
        registry.resolve("Nope")


def test_registry_refuses_one_name_for_two_classes() -> None:
    class Twin(Event, contract="Shipping.OrderAccepted"):
        pass

    registry = sample_registry()
    with pytest.raises(ContractError, match="declared by both"):
        registry.register(Twin)


def test_events_are_frozen_and_ignore_unknown_fields() -> None:
    event = OrderAccepted.model_validate({"order_id": "1", "amount": 2.5, "extra": "x"})
    assert event.order_id == "1"
    with pytest.raises(ValueError):
        event.order_id = "2"  # type: ignore[misc]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_in_the_json_is_refused_naming_the_field(token: str) -> None:
    body = '{"order_id": "1", "amount": ' + token + "}"

    with pytest.raises(ValueError) as raised:
        OrderAccepted.model_validate_json(body)

    assert "amount" in str(raised.value)
    assert "finite" in str(raised.value)
