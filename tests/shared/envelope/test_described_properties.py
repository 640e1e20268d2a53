"""AMQP described application properties keep their descriptor and the described value's type: the three
.NET types the .NET Service Bus SDKs send described (``Uri``, ``DateTimeOffset``, ``TimeSpan``) and any other
descriptor. Busbar sends them so, its receivers and the SDK-type trigger edge read a .NET sender's back so
(azure-servicebus alone drops the descriptor), the router's bridge re-sends them so, and code that only reads
a value sees the text a .NET consumer would. Wire types are read with qpid-proton
(tests/shared/envelope/wire_types.py)."""

from __future__ import annotations

import uuid
from typing import Any

import proton
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus import ServiceBusReceivedMessage as SdkReceivedMessage
from azurefunctions.extensions.bindings.servicebus.utils import get_decoded_message

from emulator.testing import EmulatorHandle
from functions.convert import incoming_from_received
from shared.amqp.connection import Namespace
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.receiver import EntityReceiver
from shared.amqp.sender import EntitySender
from shared.envelope import Envelope, PartitionKeyPolicy
from shared.envelope.properties import (
    DATETIME_OFFSET,
    TIMESPAN,
    URI,
    Described,
    Long,
    PropertyTypeError,
    Symbol,
    ULong,
    amqp_type,
)
from shared.envelope.sdk import normalise_received, to_message
from shared.router.decision import BRIDGED_FROM
from shared.router.service import bridged_copy
from tests.devhost.typed_sender import dotnet_message, send_typed
from tests.shared.envelope.wire_types import (
    DESCRIBED,
    DESCRIBED_BY_PROTON,
    DESCRIBED_EXACT,
    stored_properties,
    types_of,
)


def _send(emulator: EmulatorHandle, queue: str, message: ServiceBusMessage) -> None:
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(message)


def _send_copy(emulator: EmulatorHandle, queue: str, message: OutgoingMessage) -> None:
    """A copy Busbar makes of a received message, sent as Busbar sends it (its own AMQP sender)."""
    with EntitySender(Namespace.from_connection_string(emulator.connection_string), queue) as sender:
        sender.send(message)


def _dotnet_encoded(**properties: Any) -> bytes:
    """A message's AMQP bytes as a .NET sender writes them (proton writes every described value)."""
    encoded: bytes = dotnet_message("{}", "dotnet", **properties).encode()
    return encoded


def _as_binding_delivers(encoded: bytes) -> SdkReceivedMessage:
    """The message an SDK-type trigger gets for ``encoded`` (tests/shared/envelope/test_property_types.py)."""
    content = uuid.uuid4().bytes_le + b"x-opt-lock-token" + encoded
    return SdkReceivedMessage(get_decoded_message(content), receiver=None)


def _inner_types(properties: dict[str, Any]) -> dict[str, tuple[str | int, str]]:
    return {name: (value.descriptor, amqp_type(value.value).value) for name, value in properties.items()}


EXPECTED_INNER = {
    "uri": (URI, "string"),
    "offset": (DATETIME_OFFSET, "long"),
    "duration": (TIMESPAN, "long"),
    "custom_symbol": ("example:grade", "symbol"),
    "custom_code": (DESCRIBED["custom_code"].descriptor, "uint"),
}


def test_described_properties_go_out_with_their_descriptor_and_the_described_values_type(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    _send(emulator, queue, to_message(Envelope(application_properties=DESCRIBED), PartitionKeyPolicy.REFUSE))
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == DESCRIBED_EXACT
    assert stored["offset"].value == DESCRIBED["offset"].value
    assert stored["uri"].value == DESCRIBED["uri"].value


def test_busbars_receivers_read_a_dotnet_senders_described_properties_with_descriptor_and_type(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    send_typed(emulator.connection_string, queue, dotnet_message("{}", "dotnet", **DESCRIBED_BY_PROTON))
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as plain,
    ):
        [peeked_plain] = plain.peek_messages(max_message_count=1)
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as receiver:
        [peeked] = receiver.peek_messages(max_message_count=1)
        [received] = receiver.receive_messages(max_wait_time=5)
        receiver.complete_message(received)
    # azure-servicebus alone: the described value with the descriptor as a side attribute, never sent again
    sdk_reading: dict[Any, Any] = dict(peeked_plain.application_properties or {})
    assert sdk_reading[b"offset"] == DESCRIBED["offset"].value and not isinstance(
        sdk_reading[b"offset"], Described
    )
    for message in (peeked, received):
        properties = normalise_received(message.application_properties)
        assert properties == DESCRIBED
        assert _inner_types(properties) == EXPECTED_INNER


def test_an_sdk_type_trigger_message_gives_each_described_property_with_descriptor_and_type() -> None:
    received = _as_binding_delivers(_dotnet_encoded(**DESCRIBED_BY_PROTON))
    plain: dict[Any, Any] = dict(received.application_properties or {})
    assert plain[b"duration"] == DESCRIBED["duration"].value  # uamqp's plain value, descriptor gone
    incoming = incoming_from_received(received)
    assert incoming.application_properties == DESCRIBED
    assert _inner_types(dict(incoming.application_properties)) == EXPECTED_INNER


def test_an_sdk_type_trigger_keeps_the_value_a_descriptor_busbar_cannot_send_describes() -> None:
    # AMQP allows any descriptor; Busbar (and every Service Bus client) sends a symbol or a ulong. Another
    # descriptor is dropped at the trigger edge and the value it describes kept (docs/operations.md).
    received = _as_binding_delivers(_dotnet_encoded(odd=proton.Described("a string descriptor", 5)))
    assert incoming_from_received(received).application_properties == {"odd": Long(5)}
    assert type(incoming_from_received(received).application_properties["odd"]) is Long


def test_the_router_bridges_a_copy_with_every_described_property_of_the_original(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    incoming = incoming_from_received(_as_binding_delivers(_dotnet_encoded(**DESCRIBED_BY_PROTON)))
    _send_copy(emulator, queue, bridged_copy(incoming, "fallback"))
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == {**DESCRIBED_EXACT, BRIDGED_FROM: "string"}
    assert stored["duration"].value == DESCRIBED["duration"].value


def test_a_described_value_inside_a_described_value_is_kept_whole(emulator: EmulatorHandle) -> None:
    nested = {"nested": Described(9, Described("example:inner", Long(5)))}
    queue = emulator.create_queue()
    _send(emulator, queue, to_message(Envelope(application_properties=nested), PartitionKeyPolicy.REFUSE))
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == {"nested": "described(ulong 9, described(symbol example:inner, long))"}
    received = incoming_from_received(_as_binding_delivers(_dotnet_encoded(nested=stored["nested"])))
    assert received.application_properties == nested


@pytest.mark.parametrize(
    ("descriptor", "value", "reason"),
    [
        ("cafè:thing", 1, "a symbol .* or a ulong"),
        (2**64, 1, "a symbol .* or a ulong"),
        (-1, 1, "a symbol .* or a ulong"),
        (True, 1, "a symbol .* or a ulong"),
        (b"bytes:descriptor", 1, "a symbol .* or a ulong"),
        ("example:list", ["a"], "a described value must be a scalar"),
    ],
)
def test_a_described_value_busbar_cannot_send_is_refused_with_the_reason(
    descriptor: Any, value: Any, reason: str
) -> None:
    with pytest.raises(PropertyTypeError, match=reason):
        Described(descriptor, value)


def test_code_that_reads_a_described_property_sees_the_text_a_dotnet_consumer_has() -> None:
    # The Functions host writes DateTimeOffset and TimeSpan with Json.NET (ISO 8601 with the offset;
    # TimeSpan.ToString()), a Uri as its text; other descriptors show the value they describe.
    assert {name: str(value) for name, value in DESCRIBED.items()} == {
        "uri": "https://example.com/orders/A-1?tenant=acme",
        "offset": "2026-11-26T09:30:15.1234567+00:00",
        "duration": "1.02:03:04.5000001",
        "custom_symbol": "gold",
        "custom_code": "7",
    }
    assert str(Described(TIMESPAN, Long(-50_000_000))) == "-00:00:05"
    assert str(Described(DATETIME_OFFSET, Long(630_822_816_000_000_000))) == "2000-01-01T00:00:00+00:00"
    assert str(Described(DATETIME_OFFSET, ULong(2**64 - 1))) == str(2**64 - 1)  # past the year 9999: ticks
    # Held as what they are, not as ints or strings: a described value is never mistaken for its value.
    assert not isinstance(Described(URI, "x"), str) and not isinstance(Described(TIMESPAN, 5), int)
    assert Described(Symbol("a:b"), 1).descriptor == "a:b" and type(Described(ULong(3), 1).descriptor) is int
