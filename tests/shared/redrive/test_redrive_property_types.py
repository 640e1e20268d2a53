"""The re-drive sends a copy with every application property's AMQP type, its own stamps typed, and archives
them typed: a message from a .NET sender with a property of every type (long, DateTime, binary, char,
decimal, ...) is re-driven, re-driven again with the same wire types, and archived with every type recorded
(Busbar's own receiver, shared/amqp/, gives the re-drive the types the sender wrote)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from shared.amqp.connection import Namespace
from shared.amqp.outgoing import outgoing_message
from shared.amqp.receiver import EntityReceiver
from shared.archive.reader import read_archive, row_properties
from shared.envelope import Envelope, PartitionKeyPolicy
from shared.envelope.properties import AmqpType, Char, amqp_type
from shared.redrive.job import run_redrive
from tests.shared.envelope.wire_types import EXACT, SENT, stored_properties, types_of
from tests.shared.redrive.redrive_support import dead_letter_queue_messages, redrive_env

# A .NET sender's char and System.Decimal are read and sent again as they are (Busbar's own receiver and
# sender, shared/amqp/).
DEAD_LETTERED = {**SENT, "grade": Char("A"), "price": Decimal("19.99")}
EXPECTED = {**EXACT, "grade": "char", "price": "decimal128"}

STAMPS = {
    "busbar.redrive.count": "int",
    "busbar.redrive.at": "timestamp",
    "busbar.redrive.sequence_number": "long",
    "busbar.redrive.reason": "string",
    "busbar.redrive.description": "string",
    "busbar.redrive.source": "string",
    "busbar.redrive.run_id": "string",
}


def test_a_dotnet_shaped_message_is_redriven_twice_and_archived_with_every_type_intact(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    original = outgoing_message(
        Envelope(body=b"{}", message_id="typed-1", application_properties=DEAD_LETTERED),
        PartitionKeyPolicy.REFUSE,
    )
    dead_letter_queue_messages(cs, queue, [original], "MaxDeliveryCountExceeded")

    totals = []
    for attempt in (1, 2, 3):
        summary = run_redrive(
            redrive_env(emulator, tmp_path, [queue], BUSBAR_REDRIVE_MAX_REDRIVES="2"), receive_wait=0.3
        )
        totals.append(summary.totals())
        if attempt < 3:
            [copy] = stored_properties(emulator, queue)
            assert types_of(copy) == {**EXPECTED, **STAMPS}
            assert int(copy["busbar.redrive.count"]) == attempt
        # the handler fails again: the copy is dead-lettered once more
        with EntityReceiver(Namespace.from_connection_string(cs), queue) as receiver:
            for item in receiver.receive_messages(max_message_count=1, max_wait_time=1):
                receiver.dead_letter_message(
                    item, reason="MaxDeliveryCountExceeded", error_description="again"
                )

    assert [t["redriven"] for t in totals] == [1, 1, 0] and totals[2]["archived"] == 1
    (row,) = read_archive(str(tmp_path)).to_pylist()
    properties = row_properties(row)
    assert isinstance(properties["busbar.redrive.at"], datetime)
    assert amqp_type(properties["busbar.redrive.sequence_number"]) is AmqpType.LONG
    assert properties["binary"] == b"\x00\xff\x10" and amqp_type(properties["binary"]) is AmqpType.BINARY
    assert {name: amqp_type(properties[name]).value for name in EXPECTED} == EXPECTED
    assert {name: properties[name] for name in DEAD_LETTERED} == DEAD_LETTERED


def test_a_dead_letter_with_char_and_decimal_ahead_of_others_does_not_stop_the_redrive(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    # The re-drive receives with Busbar's own receiver (shared.amqp.receiver, qpid-proton), which reads a char
    # and a decimal; azure-servicebus fails every receive that meets the .NET message ("Handler failed:
    # 'NoneType' object is not callable": tests/devhost/servicebus/test_sdk_cannot_read_dotnet_properties.py),
    # which would stop the run for the whole queue.
    queue = provision.queue()
    dotnet = {"grade": Char("A"), "price": Decimal("-0.5")}
    messages = [
        outgoing_message(
            Envelope(body=b"{}", message_id=name, application_properties=props), PartitionKeyPolicy.REFUSE
        )
        for name, props in (("first", {}), ("dotnet", dotnet), ("last", {}))
    ]
    dead_letter_queue_messages(emulator.connection_string, queue, messages, "MaxDeliveryCountExceeded")

    summary = run_redrive(redrive_env(emulator, tmp_path, [queue]), receive_wait=0.3)

    assert summary.totals()["redriven"] == 3 and not summary.to_dict().get("errors")
    copies = stored_properties(emulator, queue)
    [copy] = [c for c in copies if "grade" in c]
    assert types_of(copy, dotnet) == {"grade": "char", "price": "decimal128"}
