"""Described application properties in the archive's typed JSON: descriptor and the described value's type
come back as they went in, the JSON is spelled as docs/operations.md shows it, and a row that is not valid
``$described`` JSON is refused naming the property, with the reason (the replay reports the row invalid)."""

from __future__ import annotations

import json

import pytest

from shared.archive.properties import (
    PropertyCodecError,
    decode_properties,
    encode_properties,
)
from shared.envelope.properties import Binary, Described, Long, amqp_type
from shared.envelope.sdk import normalise_received
from tests.shared.envelope.wire_types import DESCRIBED


def test_described_properties_round_trip_with_descriptor_and_described_type() -> None:
    properties = {**DESCRIBED, "nested": Described(9, Described("example:inner", b"\x00\xff"))}
    decoded = decode_properties(encode_properties(properties))
    assert decoded == properties

    def kinds(value: object) -> object:
        if isinstance(value, Described):
            return (type(value.descriptor), value.descriptor, kinds(value.value))
        return (type(value), amqp_type(value))

    assert {name: kinds(value) for name, value in decoded.items()} == {
        name: kinds(value) for name, value in properties.items()
    }


def test_the_json_spells_a_dotnet_date_time_offset_and_a_ulong_descriptor_as_documented() -> None:
    text = encode_properties({"offset": DESCRIBED["offset"], "custom_code": DESCRIBED["custom_code"]})
    assert json.loads(text) == {
        "offset": {
            "$described": {
                "descriptor": "com.microsoft:datetime-offset",
                "value": {"$long": str(DESCRIBED["offset"].value)},
            }
        },
        "custom_code": {
            "$described": {"descriptor": DESCRIBED["custom_code"].descriptor, "value": {"$uint": "7"}}
        },
    }


def test_a_received_described_binary_is_kept_binary_and_a_described_string_text() -> None:
    received = {b"blob": Described("example:blob", Binary(b"ab")), b"uri": DESCRIBED["uri"]}
    normalised = normalise_received(received)
    assert normalised == {"blob": Described("example:blob", b"ab"), "uri": DESCRIBED["uri"]}
    blob = normalised["blob"]
    assert isinstance(blob, Described) and type(blob.value) is bytes
    assert '"$bytes"' in encode_properties(normalised)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"text"', r'invalid \$described value .*expected \{"descriptor"'),
        ('{"descriptor": "a:b"}', r'invalid \$described value .*expected \{"descriptor"'),
        (
            '{"descriptor": "a:b", "value": 1, "extra": 2}',
            r'invalid \$described value .*expected \{"descriptor"',
        ),
        ('{"descriptor": true, "value": 1}', r"invalid \$described descriptor True"),
        ('{"descriptor": 1.5, "value": 1}', r"invalid \$described descriptor 1.5"),
        ('{"descriptor": "caf\\u00e8", "value": 1}', r"invalid \$described value .*symbol is ASCII"),
        ('{"descriptor": -1, "value": 1}', r"invalid \$described value .*outside the range of an AMQP ulong"),
        ('{"descriptor": "a:b", "value": [1]}', r"invalid \$described value: not a typed property value"),
        (
            '{"descriptor": "a:b", "value": {"$long": "x"}}',
            r"invalid \$described value: invalid \$long value",
        ),
    ],
)
def test_a_row_whose_described_value_is_not_valid_is_refused_with_the_reason(
    value: str, message: str
) -> None:
    with pytest.raises(PropertyCodecError, match="application property 'p': " + message):
        decode_properties(f'{{"fine": 1, "p": {{"$described": {value}}}}}')


def test_a_plain_integer_inside_a_described_value_is_an_integer_of_unknown_type_as_elsewhere() -> None:
    # Written by hand (Busbar always writes the described value's type): sent as an int, or a long past 32
    # bits, like any plain JSON integer. A .NET TimeSpan needs {"$long": ...}.
    decoded = decode_properties('{"t": {"$described": {"descriptor": "com.microsoft:timespan", "value": 5}}}')
    assert decoded == {"t": Described("com.microsoft:timespan", 5)}
    described = decoded["t"]
    assert (
        isinstance(described, Described)
        and type(described.value) is int
        and not isinstance(described.value, Long)
    )
