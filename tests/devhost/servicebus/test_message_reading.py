"""The trigger metadata devhost reads from a message its listener received through Busbar's seam is what the
Functions host's .NET SDK reports for it, where the Python SDK's view differs, and what azure-servicebus's own
properties read where they agree: the same message is received once with the SDK (unpatched) and then, given
back, with the seam, as devhost's listeners receive it."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from devhost.servicebus.message_reading import message_fields
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.amqp.received import ReceivedMessage
from shared.amqp.receiver import EntityReceiver
from tests.devhost.conftest import send


def _read_by_the_sdk_then_by_the_seam(
    emulator: EmulatorHandle, queue: str, count: int
) -> list[tuple[ServiceBusReceivedMessage, ReceivedMessage, dict[str, Any]]]:
    """Each of ``queue``'s ``count`` messages as azure-servicebus received it (then abandoned it) and as the
    seam received it again, with devhost's fields for the seam's delivery and its lock renewed by that
    delivery's lock token (the broker answers only to the token it locked the message with)."""
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as sdk_receiver,
    ):
        by_sdk: list[ServiceBusReceivedMessage] = []
        while len(by_sdk) < count:
            by_sdk += sdk_receiver.receive_messages(count - len(by_sdk), max_wait_time=5)
        for given_back in by_sdk:
            sdk_receiver.abandon_message(given_back)
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as receiver:
        by_seam: list[ReceivedMessage] = []
        while len(by_seam) < count:
            by_seam += receiver.receive_messages(count - len(by_seam), max_wait_time=5)
        read = [(message, message_fields(message)) for message in by_seam]
        for message in by_seam:
            receiver.renew_message_lock(message)
            receiver.complete_message(message)
    by_id = {sdk_message.message_id: sdk_message for sdk_message in by_sdk}
    return [(by_id[message.message_id], message, fields) for message, fields in read]


def test_a_message_sent_straight_to_its_queue_has_enqueued_sequence_number_zero_as_in_dotnet(
    emulator: EmulatorHandle,
) -> None:
    # Azure sets x-opt-enqueue-sequence-number only on a message that was forwarded; .NET's long property
    # then reads 0 where the Python SDK says None, and the host's metadata carries .NET's value.
    queue = emulator.create_queue()
    send(emulator.connection_string, queue, ServiceBusMessage(b"{}", message_id="m-1"))
    [(by_sdk, by_seam, fields)] = _read_by_the_sdk_then_by_the_seam(emulator, queue, 1)
    assert by_sdk.enqueued_sequence_number is None and by_seam.enqueued_sequence_number is None
    assert fields["EnqueuedSequenceNumber"] == 0
    assert fields["SequenceNumber"] == by_sdk.sequence_number


def _sdk_view(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The fields as the SDK's properties read them (and as the host's .NET SDK counts deliveries)."""
    return {
        "ContentType": message.content_type,
        "CorrelationId": message.correlation_id,
        "Subject": message.subject,
        "MessageId": message.message_id,
        "ReplyTo": message.reply_to,
        "ReplyToSessionId": message.reply_to_session_id,
        "SessionId": message.session_id,
        "To": message.to,
        "ExpiresAtUtc": message.expires_at_utc,
        "EnqueuedTimeUtc": message.enqueued_time_utc,
        "SequenceNumber": message.sequence_number,
        "DeliveryCount": (message.delivery_count or 0) + 1,
        "PartitionKey": message.partition_key,
        "DeadLetterSource": message.dead_letter_source,
    }


def test_the_fields_are_what_the_sdks_properties_read(emulator: EmulatorHandle) -> None:
    # message_fields reads a ReceivedMessage (proton's reading of the delivery) instead of the SDK's
    # properties, and the expiry from the enqueued time and time to live it has read.
    queue = emulator.create_queue()
    sent = ServiceBusMessage(
        b"{}",
        content_type="application/json",
        correlation_id="c-1",
        subject="s-1",
        message_id="m-1",
        reply_to="r-1",
        reply_to_session_id="rs-1",
        to="t-1",
        time_to_live=timedelta(hours=1),
    )
    send(emulator.connection_string, queue, sent, ServiceBusMessage(b"bare", message_id="m-2"))
    read = _read_by_the_sdk_then_by_the_seam(emulator, queue, 2)
    assert [by_seam.message_id for _, by_seam, _ in read] == ["m-1", "m-2"]
    for by_sdk, by_seam, fields in read:
        # The same message, given back once by the SDK: its delivery count has grown by one since.
        expected = {**_sdk_view(by_sdk), "DeliveryCount": _sdk_view(by_sdk)["DeliveryCount"] + 1}
        assert {name: fields[name] for name in expected} == expected
        # A lock token of this delivery (the SDK's was another delivery's): the renewal above took it.
        assert fields["LockToken"] == str(by_seam.lock_token) != str(by_sdk.lock_token)
        assert uuid.UUID(fields["LockToken"])
    (first, _, first_fields), (_, _, bare_fields) = read
    assert first_fields["ReplyToSessionId"] == "rs-1" and bare_fields["ContentType"] is None
    assert first_fields["ExpiresAtUtc"] is not None and first.expires_at_utc is not None
