"""Application properties keep the AMQP types Busbar knows: sent with them, never failing on an int past
32 bits, a property that cannot be sent named with the reason; what an SDK-type trigger's message carries
(every type, read back from uamqp's message: functions/trigger_properties.py), and what the router's bridge
therefore sends. Wire types are read with qpid-proton from the bytes the emulator stored
(tests/shared/envelope/wire_types.py)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import proton
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus import ServiceBusReceivedMessage as SdkReceivedMessage
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azurefunctions.extensions.bindings.servicebus.utils import get_decoded_message

from emulator.testing import EmulatorHandle
from functions.convert import incoming_from_received
from shared.amqp.connection import Namespace
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.sender import EntitySender
from shared.envelope import Envelope, PartitionKeyPolicy
from shared.envelope.properties import (
    Char,
    Long,
    PropertyTypeError,
    amqp_type,
    timestamp_from_ms,
    timestamp_ms,
    with_known_types,
)
from shared.envelope.sdk import sdk_application_properties, to_message
from shared.router.decision import BRIDGED_FROM
from shared.router.service import bridged_copy
from tests.shared.envelope.wire_types import (
    EXACT,
    MOMENT,
    SENT,
    stored_properties,
    types_of,
)


def _encoded(message: ServiceBusMessage) -> bytes:
    """The AMQP bytes azure-servicebus sends for ``message``."""
    outgoing = PyamqpTransport.to_outgoing_amqp_message(message.raw_amqp_message)
    return bytes(encode_payload(bytearray(), outgoing))


def _typed(properties: dict[str, Any]) -> Any:
    """``properties`` as the SDK is given them (its annotation does not know the typed form)."""
    return sdk_application_properties(properties)


def _as_binding_delivers(encoded: bytes) -> SdkReceivedMessage:
    """The message an SDK-type trigger gets for ``encoded``: the extension's decoding of the model-binding
    content (lock token, ``x-opt-lock-token``, the AMQP bytes), wrapped as its converter wraps it."""
    content = uuid.uuid4().bytes_le + b"x-opt-lock-token" + encoded
    return SdkReceivedMessage(get_decoded_message(content), receiver=None)


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


def test_every_property_goes_out_with_its_amqp_type(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    _send(
        emulator,
        queue,
        to_message(Envelope(body=b"x", application_properties=SENT), PartitionKeyPolicy.REFUSE),
    )
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == EXACT
    assert stored["long"] == 1_795_749_929_335 and bytes(stored["binary"]) == b"\x00\xff\x10"
    assert stored["timestamp"] == proton.timestamp(timestamp_ms(MOMENT))


@pytest.mark.parametrize(
    ("value", "sent_as"),
    [
        (2**31 - 1, "int"),
        (-(2**31), "int"),
        (2**31, "long"),
        (1_795_749_929_335, "long"),
        (2**64 - 1, "ulong"),
    ],
)
def test_an_int_of_unknown_type_is_an_int_or_a_long_never_an_error(
    emulator: EmulatorHandle, value: int, sent_as: str
) -> None:
    queue = emulator.create_queue()
    _send(
        emulator, queue, to_message(Envelope(application_properties={"n": value}), PartitionKeyPolicy.REFUSE)
    )
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == {"n": sent_as}
    assert int(stored["n"]) == value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (Decimal("1E+7000"), "does not fit an AMQP decimal128"),
        (2**64, "does not fit any AMQP integer type"),
        (Decimal("NaN"), "not a finite decimal"),
        (["a", "list"], "not an AMQP scalar"),
    ],
)
def test_a_property_that_cannot_be_sent_is_named_with_the_reason(value: Any, reason: str) -> None:
    with pytest.raises(PropertyTypeError, match=f"application property 'bad' cannot be sent: .*{reason}"):
        sdk_application_properties({"fine": 1, "bad": value})


def test_azure_servicebus_is_given_no_char_a_new_message_with_one_is_refused_naming_it() -> None:
    # Busbar's own new messages never carry a char; a copy of a received one, which may, goes out through
    # shared.amqp.sender. So nothing is added to the SDK's encoders, and a char given to it is refused.
    envelope = Envelope(body=b"{}", application_properties={"tenant": "acme", "grade": Char("A")})
    with pytest.raises(
        PropertyTypeError, match=r"'grade' cannot be sent: azure-servicebus has no encoding .*char"
    ):
        to_message(envelope, PartitionKeyPolicy.REFUSE)


def test_an_sdk_type_trigger_message_gives_every_property_with_the_amqp_type_it_arrived_with() -> None:
    # The extension decodes the model-binding content with uamqp and hands over the SDK message built from
    # uamqp's Python values (every integer type and a timestamp an int, a binary bytes like a string); uamqp's
    # C message still holds the AMQP types, and the edge reads them back.
    encoded = _encoded(ServiceBusMessage(b"{}", application_properties=_typed(SENT)))
    received = _as_binding_delivers(encoded)
    plain: dict[Any, Any] = dict(received.application_properties or {})
    assert plain[b"timestamp"] == timestamp_ms(MOMENT)  # the SDK's plain int
    incoming = incoming_from_received(received)
    assert {name: amqp_type(value).value for name, value in incoming.application_properties.items()} == EXACT
    assert incoming.application_properties["binary"] == b"\x00\xff\x10"
    assert incoming.application_properties["timestamp"] == MOMENT


def test_types_are_read_back_past_the_annotations_a_received_message_carries() -> None:
    # A received message has message annotations (sequence number, enqueued time), which uamqp writes back
    # as a bare map, without their section descriptor: the reading steps over it.
    sent = ServiceBusMessage(b"{}", application_properties=_typed({"long": Long(5), "at": MOMENT}))
    sent.raw_amqp_message.annotations = {b"x-opt-sequence-number": 7, b"x-opt-partition-key": b"p"}
    sent.raw_amqp_message.delivery_annotations = {b"x-opt-lock-token": b"t"}
    incoming = incoming_from_received(_as_binding_delivers(_encoded(sent)))
    assert incoming.application_properties == {"long": 5, "at": MOMENT}
    assert type(incoming.application_properties["long"]) is Long


def test_a_message_not_decoded_by_uamqp_keeps_the_sdks_plain_values() -> None:
    # A received message whose AMQP message is pyamqp's (not the binding extension's uamqp one): nothing to
    # read types back from, so the SDK's values are taken as they are.
    encoded = _encoded(ServiceBusMessage(b"{}", application_properties=_typed({"long": Long(5), "n": 7})))
    received = SdkReceivedMessage(decode_payload(memoryview(encoded)), receiver=None)
    incoming = incoming_from_received(received)
    assert incoming.application_properties == {"long": 5, "n": 7}
    assert type(incoming.application_properties["long"]) is int


def test_the_router_bridges_a_copy_with_every_property_type_of_the_original(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    encoded = _encoded(ServiceBusMessage(b"{}", application_properties=_typed(SENT)))
    incoming = incoming_from_received(_as_binding_delivers(encoded))
    _send_copy(emulator, queue, bridged_copy(incoming, "fallback"))
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == {**EXACT, BRIDGED_FROM: "string"}
    assert bytes(stored["binary"]) == b"\x00\xff\x10" and int(stored["timestamp"]) == timestamp_ms(MOMENT)


def test_busbar_stamps_a_receiver_hands_back_as_ints_get_their_types_back() -> None:
    typed = with_known_types(
        {
            "busbar.redrive.at": 1_795_749_929_335,
            "busbar.redrive.sequence_number": 12,
            "other": 1_795_749_929_335,
        }
    )
    assert typed["busbar.redrive.at"] == timestamp_from_ms(1_795_749_929_335)
    assert type(typed["busbar.redrive.sequence_number"]) is Long
    assert type(typed["other"]) is int
