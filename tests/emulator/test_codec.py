"""The AMQP type codec: round-trips, exact encodings the SDK depends on, and precise decode errors."""

from __future__ import annotations

import decimal
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.amqp.frames import FrameError, decode_performative, frame
from emulator.encoding.message import BATCH_MESSAGE_FORMAT, split_batch
from shared.amqp.encoding.codec import DecodeError, decode_value, encode, skip_value
from shared.amqp.encoding.sections import parse_message, section
from shared.amqp.encoding.types import (
    Array,
    Decimal,
    Described,
    Long,
    Symbol,
    Timestamp,
    UInt,
    ULong,
    decode_bid,
    encode_bid128,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.binary(max_size=300),
    st.uuids(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=8),
        st.dictionaries(st.text(max_size=20), inner, max_size=8),
    ),
    max_leaves=40,
)


@given(values)
def test_any_value_round_trips_and_skip_finds_its_end(value: Any) -> None:
    raw = encode(value)
    decoded, end = decode_value(raw)
    assert decoded == value
    assert end == len(raw)
    assert skip_value(raw, 0) == len(raw)


@given(values)
def test_every_truncation_is_a_decode_error_never_another_exception(value: Any) -> None:
    raw = encode(value)
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            decode_value(raw[:cut])


def test_typed_wrappers_choose_the_exact_amqp_type() -> None:
    assert encode(UInt(0)) == b"\x43"
    assert encode(UInt(300)) == b"\x70\x00\x00\x01\x2c"
    assert encode(ULong(7)) == b"\x53\x07"
    assert encode(Long(1)) == b"\x81" + (1).to_bytes(8, "big")
    assert encode(Timestamp(5)) == b"\x83" + (5).to_bytes(8, "big")
    assert encode(Symbol("ab")) == b"\xa3\x02ab"
    assert isinstance(decode_value(encode(Symbol("x")))[0], Symbol)
    assert isinstance(decode_value(encode(Timestamp(1)))[0], Timestamp)


def test_arrays_of_uuids_and_timestamps_round_trip_as_the_sdk_sends_them() -> None:
    tokens = (uuid.uuid4(), uuid.uuid4())
    decoded, _ = decode_value(encode(Array(0x98, tokens)))
    assert decoded == Array(0x98, tokens)
    stamps, _ = decode_value(encode(Array(0x83, (Timestamp(1), Timestamp(2)))))
    assert stamps.items == (1, 2)


def test_unknown_constructor_names_its_byte_and_offset() -> None:
    with pytest.raises(DecodeError, match=r"unknown constructor 0xff at offset 0"):
        decode_value(b"\xff")


def test_performatives_use_smallulong_descriptors_and_decode_back() -> None:
    raw = frame(3, 0x10, ["container", None, UInt(512)])
    assert raw[8:11] == b"\x00\x53\x10"
    code, fields, _ = decode_performative(memoryview(raw)[8:])
    assert (code, fields[0], fields[2]) == (0x10, "container", 512)


def test_a_body_that_is_not_a_described_list_is_a_decode_error() -> None:
    with pytest.raises(FrameError) as info:
        decode_performative(encode("not a performative"))
    assert info.value.condition == "amqp:decode-error"


def test_message_sections_are_accepted_in_any_order_and_body_is_kept_verbatim() -> None:
    body = section(0x75, b"payload")
    raw = section(0x73, ["id-1"]) + body + section(0x71, {Symbol("x-opt-lock-token"): uuid.uuid4()})
    parsed = parse_message(raw)
    assert parsed.prop(0) == "id-1"
    assert parsed.body_raw == body


def test_batch_envelope_splits_into_its_inner_messages() -> None:
    inner = [section(0x73, [f"m{i}"]) + section(0x75, b"x") for i in range(3)]
    envelope = section(0x73, ["m0"]) + b"".join(section(0x75, m) for m in inner)
    assert split_batch(envelope) == inner
    assert BATCH_MESSAGE_FORMAT == 0x80013700


def test_described_values_round_trip() -> None:
    value = Described(ULong(0x24), [])
    assert decode_value(encode(value))[0] == Described(0x24, [])


@pytest.mark.parametrize(
    "number", ["19.99", "1.5", "-0.001", "0", "12345678901234567890123456789012.34", "1E+6111", "1E-6176"]
)
def test_a_decimal_number_is_written_as_the_decimal128_dotnet_writes_and_read_back(number: str) -> None:
    # .NET writes System.Decimal as decimal128 in BID (Microsoft.Azure.Amqp), as azure-servicebus's
    # encode_decimal128 does; Busbar sends a Decimal property so (shared.amqp.values).
    encoded = encode(decimal.Decimal(number))
    assert encoded[0] == 0x94 and len(encoded) == 17
    value, end = decode_value(encoded)
    assert end == 17 and isinstance(value, Decimal) and value.value() == decimal.Decimal(number)
    assert decode_bid(encode_bid128(decimal.Decimal(number))) == decimal.Decimal(number)


def test_a_decimal_decimal128_cannot_hold_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="does not fit an AMQP decimal128"):
        encode(decimal.Decimal("1" * 35))
    assert encode_bid128(decimal.Decimal("19.99")).hex() == "303c00000000000000000000000007cf"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # System.Decimal 1.5 as Microsoft.Azure.Amqp writes it: exponent -1 (biased 6175), coefficient 15.
        (bytes.fromhex("303e0000" + "00" * 11 + "0f"), decimal.Decimal("1.5")),
        (bytes.fromhex("b03e0000" + "00" * 11 + "0f"), decimal.Decimal("-1.5")),
        (bytes.fromhex("30400000" + "00" * 12), decimal.Decimal("0")),
        (bytes.fromhex("3200000f"), decimal.Decimal("1.5")),  # decimal32: bias 101
        ((0x18D << 53 | 15).to_bytes(8, "big"), decimal.Decimal("1.5")),  # decimal64: bias 398
        (bytes.fromhex("78" + "00" * 15), decimal.Decimal("Infinity")),
        (bytes.fromhex("f8" + "00" * 15), decimal.Decimal("-Infinity")),
    ],
)
def test_decimals_of_every_width_are_read_as_ieee_754_binary_integer_decimals(
    raw: bytes, expected: decimal.Decimal
) -> None:
    assert decode_bid(raw) == expected


def test_a_decimal_nan_is_read_as_nan_and_a_non_canonical_coefficient_as_zero() -> None:
    assert decode_bid(bytes.fromhex("7c" + "00" * 15)).is_nan()
    # 11 after the sign: the coefficient has an implicit 100 prefix, past 34 digits, so IEEE 754 reads zero.
    assert decode_bid(bytes.fromhex("6c" + "ff" * 15)) == 0
