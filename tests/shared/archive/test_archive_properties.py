"""Typed JSON for application properties: what goes in comes back with the same type."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.archive.properties import (
    PropertyCodecError,
    decode_properties,
    encode_properties,
)
from shared.envelope.properties import (
    Byte,
    Char,
    Float32,
    Long,
    Symbol,
    UInt,
    ULong,
    UShort,
    amqp_type,
)
from shared.envelope.sdk import normalise_received

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.uuids(),
    st.datetimes(timezones=st.just(UTC)),
)


@given(st.dictionaries(st.text(), scalars))
def test_every_amqp_scalar_round_trips_with_its_type(properties: dict[str, object]) -> None:
    decoded = decode_properties(encode_properties(properties))

    assert decoded == properties
    assert {k: type(v) for k, v in decoded.items()} == {k: type(v) for k, v in properties.items()}


def test_the_json_spells_the_tagged_types_as_documented() -> None:
    ref = uuid.UUID("12345678-1234-5678-1234-567812345678")
    moment = datetime(2026, 11, 22, 12, 0, tzinfo=timezone(timedelta(hours=1)))

    text = encode_properties({"b": b"\x00\xff", "d": moment, "u": ref, "n": 1, "f": 1.0, "s": "x"})

    assert text == (
        '{"b": {"$bytes": "AP8="}, "d": {"$datetime": "2026-11-22T12:00:00+01:00"}, "f": 1.0, "n": 1, '
        '"s": "x", "u": {"$uuid": "12345678-1234-5678-1234-567812345678"}}'
    )
    assert decode_properties(text)["d"] == moment


def test_floats_json_cannot_spell_are_tagged() -> None:
    decoded = decode_properties(encode_properties({"nan": math.nan, "up": math.inf, "down": -math.inf}))

    assert math.isnan(decoded["nan"])  # type: ignore[arg-type]
    assert (decoded["up"], decoded["down"]) == (math.inf, -math.inf)


def test_a_naive_datetime_is_taken_as_utc() -> None:
    decoded = decode_properties(encode_properties({"d": datetime(2026, 1, 1, 8, 0)}))
    assert decoded["d"] == datetime(2026, 1, 1, 8, 0, tzinfo=UTC)


def test_received_properties_get_text_keys_and_utf8_values_as_strings() -> None:
    received = {b"tenant": b"acme", b"n": 5, b"blob": b"\xff\xfe", b"ok": True}

    assert normalise_received(received) == {"tenant": "acme", "n": 5, "blob": b"\xff\xfe", "ok": True}
    assert normalise_received(None) == {}


def test_a_value_that_is_not_an_amqp_scalar_is_refused() -> None:
    with pytest.raises(PropertyCodecError, match="type list is not an AMQP scalar"):
        encode_properties({"l": [1, 2]})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[1]", "must be a JSON object, got list"),
        ('{"a": {"$bytes": "%%%"}}', "invalid $bytes value"),
        ('{"a": {"$uuid": "nope"}}', "invalid $uuid value"),
        ('{"a": {"$float": "big"}}', "invalid $float value 'big': expected nan, inf or -inf"),
        ('{"a": {"$other": "x"}}', "not a typed property value"),
        ('{"a": [1]}', "not a typed property value"),
    ],
)
def test_stored_json_that_is_not_typed_property_json_is_refused_precisely(text: str, message: str) -> None:
    with pytest.raises(PropertyCodecError, match=message.replace("$", r"\$")):
        decode_properties(text)


def test_no_text_means_no_properties() -> None:
    assert decode_properties(None) == {} and decode_properties("") == {}


def test_every_amqp_type_busbar_knows_round_trips_through_typed_tags() -> None:
    properties = {
        "byte": Byte(-7),
        "ushort": UShort(65000),
        "uint": UInt(4_000_000_000),
        "long": Long(5),
        "ulong": ULong(2**64 - 1),
        "float": Float32(1.5),
        "nan32": Float32(math.nan),
        "decimal": Decimal("-12.345"),
        "char": Char("A"),
        "symbol": Symbol("sym"),
        "unknown_int": 1_795_749_929_335,
    }
    decoded = decode_properties(encode_properties(properties))
    assert {name: (type(value), amqp_type(value)) for name, value in decoded.items() if name != "nan32"} == {
        name: (type(value), amqp_type(value)) for name, value in properties.items() if name != "nan32"
    }
    assert {k: v for k, v in decoded.items() if k != "nan32"} == {
        k: v for k, v in properties.items() if k != "nan32"
    }
    assert isinstance(decoded["nan32"], Float32) and math.isnan(decoded["nan32"])
    assert '"long": {"$long": "5"}' in encode_properties(properties)


def test_a_row_written_before_types_were_recorded_decodes_with_busbar_stamps_typed() -> None:
    old = '{"busbar.redrive.at": 1795749929335, "busbar.redrive.sequence_number": 12, "n": 7}'
    decoded = decode_properties(old)
    assert decoded["busbar.redrive.at"] == datetime(2026, 11, 27, 3, 25, 29, 335000, tzinfo=UTC)
    assert type(decoded["busbar.redrive.sequence_number"]) is Long
    assert type(decoded["n"]) is int


def test_a_tagged_integer_out_of_its_range_is_refused() -> None:
    with pytest.raises(PropertyCodecError, match=r"invalid \$ubyte value '300'"):
        decode_properties('{"x": {"$ubyte": "300"}}')
