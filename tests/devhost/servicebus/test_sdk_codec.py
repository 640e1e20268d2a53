"""devhost's SDK codec shim (devhost/servicebus/sdk_codec.py): char and decimal properties a .NET sender
puts on a message are read by azure-servicebus once devhost's listeners installed it, so a message carrying
one no longer makes every receive and peek of its queue fail; nothing else the SDK decodes changes; the shim
says when it can go; and Busbar itself gives azure-servicebus no char to send.
"""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue
from azure.servicebus._pyamqp import _decode
from azure.servicebus._pyamqp._encode import encode_decimal128

from devhost.servicebus import sdk_codec
from emulator.testing import EmulatorHandle
from shared.amqp.outgoing import OutgoingMessage
from shared.envelope import Envelope, PartitionKeyPolicy
from shared.envelope.properties import Char, PropertyTypeError
from shared.envelope.sdk import to_message
from tests.shared.amqp.typed_send import send_typed
from tests.shared.envelope.wire_types import decode_section, types_of

SHIM_CODES = {0x73, 0x74, 0x84, 0x94}


def _pristine_decode_module() -> ModuleType:
    """A fresh copy of the SDK's decoder module, as the SDK ships it (the shim patched the imported one)."""
    spec = importlib.util.find_spec("azure.servicebus._pyamqp._decode")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sdk_encoded(value: Decimal) -> bytes:
    out = bytearray()
    encode_decimal128(out, value, with_constructor=False)
    return bytes(out)


def test_the_sdk_still_lacks_what_the_shim_adds() -> None:
    # When this fails, azure-servicebus decodes these itself: remove devhost/servicebus/sdk_codec.py.
    pristine: Any = _pristine_decode_module()
    assert [code for code in (0x73, 0x74, 0x84) if pristine._DECODE_BY_CONSTRUCTOR[code] is None] == [
        0x73,
        0x74,
        0x84,
    ]
    assert sdk_codec.missing_in_sdk() == [0x73, 0x74, 0x84]
    # ... and its decimal128 decoder misreads its own encoding of a coefficient past 2^32.
    value = Decimal("12345678901234.5678")
    try:
        _, decoded = pristine._decode_decimal128(memoryview(_sdk_encoded(value)))
    except ValueError:
        decoded = None
    assert decoded != value


def test_nothing_else_the_sdk_decodes_changes() -> None:
    pristine: Any = _pristine_decode_module()
    for code in range(256):
        if code in SHIM_CODES:
            continue
        ours, theirs = _decode._DECODE_BY_CONSTRUCTOR[code], pristine._DECODE_BY_CONSTRUCTOR[code]
        assert getattr(ours, "__qualname__", None) == getattr(theirs, "__qualname__", None), hex(code)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # System.Decimal 1.5 as Microsoft.Azure.Amqp writes it: exponent -1 (biased 6175), coefficient 15.
        (bytes.fromhex("303e0000" + "00" * 11 + "0f"), Decimal("1.5")),
        (bytes.fromhex("b03e0000" + "00" * 11 + "0f"), Decimal("-1.5")),
        (bytes.fromhex("30400000" + "00" * 12), Decimal("0")),
        (bytes.fromhex("3200000f"), Decimal("1.5")),  # decimal32: bias 101
        ((0x18D << 53 | 15).to_bytes(8, "big"), Decimal("1.5")),  # decimal64: bias 398
        (bytes.fromhex("78" + "00" * 15), Decimal("Infinity")),
        (bytes.fromhex("f8" + "00" * 15), Decimal("-Infinity")),
    ],
)
def test_decimals_are_read_as_ieee_754_binary_integer_decimals(raw: bytes, expected: Decimal) -> None:
    assert sdk_codec.decode_bid(raw) == expected


def test_a_decimal_nan_is_read_as_nan_and_a_non_canonical_coefficient_as_zero() -> None:
    assert sdk_codec.decode_bid(bytes.fromhex("7c" + "00" * 15)).is_nan()
    # 11 after the sign: the coefficient has an implicit 100 prefix, past 34 digits, so IEEE 754 reads zero.
    assert sdk_codec.decode_bid(bytes.fromhex("6c" + "ff" * 15)) == 0


@pytest.mark.parametrize(
    "value",
    [
        "1.5",
        "-79228162514264337593543950335",
        "0.0000000000000000000000000001",
        "1234567890123456789012345678901234",
    ],
)
def test_the_sdks_own_decimal128_encoding_reads_back(value: str) -> None:
    assert sdk_codec.decode_bid(_sdk_encoded(Decimal(value))) == Decimal(value)


def test_a_dead_letter_with_char_and_decimal_properties_no_longer_stalls_its_queue(
    emulator: EmulatorHandle,
) -> None:
    sdk_codec.install()  # as devhost's listeners do before they receive
    queue = emulator.create_queue(max_delivery_count=1)
    dotnet = {"grade": Char("A"), "price": Decimal("19.99"), "tenant": "acme"}
    # As a .NET sender sends them (azure-servicebus sends no char): Busbar's own AMQP sender.
    send_typed(
        emulator.connection_string,
        queue,
        OutgoingMessage(body=b"1", message_id="before"),
        OutgoingMessage(body=b"2", message_id="dotnet", application_properties=dotnet),
        OutgoingMessage(body=b"3", message_id="after"),
    )
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(queue) as receiver:
            for message in receiver.receive_messages(max_message_count=3, max_wait_time=5):
                receiver.dead_letter_message(message, reason="HandlerFailed")
        dead: Any = emulator.call(
            lambda: [
                m.parsed.application_properties_raw
                for m in emulator.emulator.namespace.queues[queue].dead_letter.peek(0, 10)
            ]
        )
        assert types_of(decode_section(dead[1]), {"grade", "price"}) == {
            "grade": "char",
            "price": "decimal128",
        }
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert [m.message_id for m in dlq.peek_messages(max_message_count=10)] == [
                "before",
                "dotnet",
                "after",
            ]
            received = dlq.receive_messages(max_message_count=3, max_wait_time=5)
            assert [m.message_id for m in received] == ["before", "dotnet", "after"]
            properties = received[1].application_properties or {}
            assert isinstance(properties[b"grade"], Char) and properties[b"grade"] == "A"
            assert properties[b"price"] == Decimal("19.99")
            for message in received:
                dlq.complete_message(message)


def test_azure_servicebus_is_given_no_char_a_new_message_with_one_is_refused_naming_it() -> None:
    # Busbar's own new messages never carry a char; a copy of a received one, which may, goes out through
    # shared.amqp.sender. So nothing is added to the SDK's encoders, and a char given to it is refused.
    envelope = Envelope(body=b"{}", application_properties={"tenant": "acme", "grade": Char("A")})
    with pytest.raises(
        PropertyTypeError, match=r"'grade' cannot be sent: azure-servicebus has no encoding .*char"
    ):
        to_message(envelope, PartitionKeyPolicy.REFUSE)
