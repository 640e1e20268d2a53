"""Why devhost's listeners receive through Busbar's seam (python-qpid-proton) and not with azure-servicebus:
the SDK, unpatched (7.15), cannot read a .NET sender's ``char`` or ``decimal`` application property (it has
no decoder for char, decimal32 or decimal64, and its decimal128 decoder fails on a coefficient past 2^32), so
a queue holding such a message fails the SDK's peek and receive, where the seam reads it as a Functions host
(.NET) does. When this fails, the SDK reads them itself (docs/operations.md)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import proton
import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import ServiceBusError

from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.amqp.encoding.types import encode_bid128
from shared.amqp.receiver import EntityReceiver
from shared.envelope.properties import Char
from tests.devhost.typed_sender import dotnet_message, send_typed

PRICE = Decimal("12345678901234.5678")

DOTNET: dict[str, tuple[Any, Any]] = {
    # name: (as a .NET sender puts it on the wire, as the seam reads it)
    "grade": (proton.char("A"), Char("A")),
    # A System.Decimal as .NET writes it: a decimal128 (BID).
    "price": (proton.decimal128(encode_bid128(PRICE)), PRICE),
    "rate": (proton.decimal32(0x3200000F), Decimal("1.5")),  # BID, bias 101
}


@pytest.mark.parametrize("name", sorted(DOTNET))
def test_azure_servicebus_cannot_peek_or_receive_a_dotnet_char_or_decimal_the_seam_reads(
    emulator: EmulatorHandle, name: str
) -> None:
    queue = emulator.create_queue()
    on_wire, read = DOTNET[name]
    send_typed(emulator.connection_string, queue, dotnet_message("dotnet", "dotnet", **{name: on_wire}))
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as seam:
        [peeked] = seam.peek_messages(max_message_count=1)
    assert peeked.application_properties == {name: read}
    assert type(peeked.application_properties[name]) is type(read)
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        with pytest.raises(ServiceBusError):
            receiver.peek_messages(max_message_count=1)
        try:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        except ServiceBusError:  # a char, a decimal32: the receive fails
            received = []
        # A decimal128 past 2^32: the receive comes back empty. Either way the message, which the seam
        # peeked above, is never handed to an SDK receiver.
        assert received == []
