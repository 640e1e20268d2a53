"""The AMQP bytes devhost hands an SDK-type trigger keep every integer deliverable with the AMQP type it was
sent with: devhost's listeners receive through Busbar's seam, which keeps each delivery's bytes, so an int
stays an int, a long a long (a small one too), and a ulong past a long's range a ulong (re-encoded as a
long, it would fail the whole delivery), as the host's .NET SDK, whose integer types are AMQP's, writes
them back."""

from __future__ import annotations

from typing import Any

import proton
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes

from devhost.servicebus.model_binding_data import LOCK_TOKEN_MARKER, model_binding_content
from emulator.testing import EmulatorHandle
from shared.amqp.outgoing import OutgoingMessage
from tests.devhost.seam_receiving import receive_as_the_listeners_do
from tests.shared.amqp.typed_send import send_typed
from tests.shared.envelope.wire_types import EXACT, SENT, types_of, wire_type

INTEGERS = ("byte", "short", "int", "long", "small_long", "ubyte", "ushort", "uint", "ulong")


def _properties_the_worker_gets(content: bytes) -> dict[str, Any]:
    """The application properties of an SDK-type trigger's content, decoded by proton (typed classes)."""
    decoded = proton.Message()
    decoded.decode(content[content.index(LOCK_TOKEN_MARKER) + len(LOCK_TOKEN_MARKER) :])
    raw: dict[Any, Any] = dict(decoded.properties or {})
    return {str(name): value for name, value in raw.items()}


def test_integers_of_every_range_reach_the_worker_and_a_ulong_past_a_long_stays_a_ulong(
    emulator: EmulatorHandle,
) -> None:
    # As a Python sender sends them: azure-servicebus types a plain int by its value, and a long or ulong
    # when told so.
    queue = emulator.create_queue()
    properties: Any = {
        "small": 5,
        "wide": {TYPE: AMQPTypes.long, VALUE: 2**40},
        "huge": {TYPE: AMQPTypes.ulong, VALUE: 2**64 - 1},
    }
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage(b"{}", application_properties=properties))
    [message] = receive_as_the_listeners_do(emulator.connection_string, queue, 1)
    sent = _properties_the_worker_gets(model_binding_content(message))
    assert {name: wire_type(value) for name, value in sent.items()} == {
        "small": "int",
        "wide": "long",
        "huge": "ulong",
    }
    assert sent == {"small": 5, "wide": 2**40, "huge": 2**64 - 1}


def test_every_amqp_integer_type_reaches_the_worker_as_it_was_sent(emulator: EmulatorHandle) -> None:
    # As a .NET sender sends them (sbyte, short, int, long, byte, ushort, uint, ulong): each keeps its
    # type, a long that would fit 32 bits and a ulong at its maximum included.
    queue = emulator.create_queue()
    integers = {name: SENT[name] for name in INTEGERS}
    send_typed(
        emulator.connection_string,
        queue,
        OutgoingMessage(body=b"{}", message_id="integers", application_properties=integers),
    )
    [message] = receive_as_the_listeners_do(emulator.connection_string, queue, 1)
    sent = _properties_the_worker_gets(model_binding_content(message))
    assert types_of(sent) == {name: EXACT[name] for name in INTEGERS}
    assert sent == {name: int(value) for name, value in integers.items()}
