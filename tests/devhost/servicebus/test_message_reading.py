"""The trigger metadata devhost reads from a received message is what the Functions host's .NET SDK
reports for it, where the Python SDK's view differs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from devhost.servicebus.message_reading import message_fields
from emulator.testing import EmulatorHandle


def test_a_message_sent_straight_to_its_queue_has_enqueued_sequence_number_zero_as_in_dotnet(
    emulator: EmulatorHandle,
) -> None:
    # Azure sets x-opt-enqueue-sequence-number only on a message that was forwarded; .NET's long property
    # then reads 0 where the Python SDK says None, and the host's metadata carries .NET's value.
    queue = emulator.create_queue()
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(b"{}"))
        with client.get_queue_receiver(queue) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            fields = message_fields(message)
            receiver.complete_message(message)
    assert message.enqueued_sequence_number is None
    assert fields["EnqueuedSequenceNumber"] == 0
    assert fields["SequenceNumber"] == message.sequence_number


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
        "LockToken": str(message.lock_token),
        "DeliveryCount": (message.delivery_count or 0) + 1,
        "PartitionKey": message.partition_key,
        "DeadLetterSource": message.dead_letter_source,
    }


def test_the_fields_are_what_the_sdks_properties_read(emulator: EmulatorHandle) -> None:
    # message_fields reads the AMQP properties section once instead of through each SDK property, and the
    # expiry from the enqueued time and time to live it has read.
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
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([sent, ServiceBusMessage(b"bare")])
        with client.get_queue_receiver(queue) as receiver:
            received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            while len(received) < 2:
                received += receiver.receive_messages(max_wait_time=5)
            read = [(message_fields(m), _sdk_view(m)) for m in received]
            for message in received:
                receiver.complete_message(message)
    for fields, sdk in read:
        assert {name: fields[name] for name in sdk} == sdk
    assert read[0][0]["ReplyToSessionId"] == "rs-1" and read[1][0]["ContentType"] is None
    assert read[0][0]["ExpiresAtUtc"] is not None
