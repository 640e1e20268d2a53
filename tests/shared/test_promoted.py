"""Promoted properties: a contract names the fields every publisher copies into application properties, each
under the field's own name with its AMQP type; a field that cannot be promoted is refused when the contract
is declared."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum

import pytest

from app.endpoints.sample.events import OrderAccepted, OrderAcceptedV2
from shared.contracts import ContractError, Event
from shared.envelope.properties import AmqpType, Long, amqp_type
from shared.promoted import promoted_properties


class Region(StrEnum):
    EMEA = "emea"


class Typed(
    Event,
    contract="Tests.Promoted.Typed",
    promoted=("count", "amount", "price", "urgent", "region", "zone", "at", "note"),
):
    count: int
    amount: float
    price: Decimal
    urgent: bool
    region: str
    zone: Region
    at: datetime
    note: str | None = None
    secret: str = ""


def test_each_promoted_field_becomes_a_property_of_its_own_name_with_its_amqp_type() -> None:
    moment = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    event = Typed(
        count=3,
        amount=5000.0,
        price=Decimal("12.50"),
        urgent=True,
        region="emea",
        zone=Region.EMEA,
        at=moment,
    )

    promoted = promoted_properties(event)

    assert promoted == {
        "count": 3,
        "amount": 5000.0,
        "price": 12.5,
        "urgent": True,
        "region": "emea",
        "zone": "emea",
        "at": moment,
    }
    types = {name: amqp_type(value) for name, value in promoted.items()}
    assert types == {
        "count": AmqpType.LONG,  # an int is a long whatever its size: a filter compares like with like
        "amount": AmqpType.DOUBLE,
        "price": AmqpType.DOUBLE,  # SQL filters have no decimal: the broker compares doubles
        "urgent": AmqpType.BOOLEAN,
        "region": AmqpType.STRING,
        "zone": AmqpType.STRING,
        "at": AmqpType.TIMESTAMP,
    }
    assert isinstance(promoted["count"], Long) and type(promoted["zone"]) is str


def test_a_field_holding_none_is_left_out_and_an_unpromoted_field_never_travels() -> None:
    event = Typed(
        count=1,
        amount=1.0,
        price=Decimal(1),
        urgent=False,
        region="x",
        zone=Region.EMEA,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        secret="s",
    )

    promoted = promoted_properties(event)

    assert "note" not in promoted and "secret" not in promoted


def test_an_interfaces_promoted_fields_are_promoted_by_every_event_deriving_from_it() -> None:
    class IPriced(Event, contract="Tests.Promoted.IPriced", abstract=True, promoted=("amount",)):
        amount: float

    class Priced(IPriced, contract="Tests.Promoted.Priced", promoted=("region",)):
        region: str

    assert Priced.promoted_fields == ("amount", "region")
    assert promoted_properties(Priced(amount=2.0, region="emea")) == {"amount": 2.0, "region": "emea"}


def test_the_sample_order_accepted_promotes_amount_and_region_and_v2_promotes_nothing() -> None:
    assert OrderAccepted.promoted_fields == ("amount", "region")
    assert promoted_properties(OrderAccepted(order_id="o", amount=5000, region="emea")) == {
        "amount": 5000.0,
        "region": "emea",
    }
    assert OrderAcceptedV2.promoted_fields == ()


def test_promoting_a_field_the_contract_does_not_have_is_refused_naming_it() -> None:
    with pytest.raises(ContractError, match=r"promoted field 'amout' is not a field of the contract"):

        class Misspelt(Event, contract="Tests.Promoted.Misspelt", promoted=("amout",)):
            amount: float


def test_promoting_a_field_without_an_amqp_scalar_type_is_refused_with_the_reason() -> None:
    with pytest.raises(ContractError, match=r"promoted field 'lines' cannot be promoted: its type list"):

        class Lines(Event, contract="Tests.Promoted.Lines", promoted=("lines",)):
            lines: list[str]

    with pytest.raises(ContractError, match=r"promoted field 'either' cannot be promoted: a union"):

        class Either(Event, contract="Tests.Promoted.Either", promoted=("either",)):
            either: int | str


def test_a_single_name_given_as_a_string_is_refused_instead_of_promoting_its_letters() -> None:
    with pytest.raises(ContractError, match=r"promoted= takes a tuple of field names"):

        class Letters(Event, contract="Tests.Promoted.Letters", promoted="amount"):
            amount: float


def test_a_promoted_name_taken_by_another_property_of_the_message_is_refused() -> None:
    class Stamped(Event, contract="Tests.Promoted.Stamped", promoted=("region",)):
        region: str

    with pytest.raises(ValueError, match=r"promoted field 'region' has the name of another property"):
        promoted_properties(Stamped(region="x"), reserved=["Region"])
