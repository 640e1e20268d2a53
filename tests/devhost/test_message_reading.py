"""The trigger metadata devhost reads from a received message is what the Functions host's .NET SDK
reports for it, where the Python SDK's view differs."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from devhost.message_reading import message_fields
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


def test_the_text_fields_are_what_the_sdks_properties_read(emulator: EmulatorHandle) -> None:
    # message_fields reads the AMQP properties section once instead of through each SDK property.
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
    )
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([sent, ServiceBusMessage(b"bare")])
        with client.get_queue_receiver(queue) as receiver:
            received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            while len(received) < 2:
                received += receiver.receive_messages(max_wait_time=5)
            read = [(message_fields(m), m) for m in received]
            for message in received:
                receiver.complete_message(message)
    for fields, message in read:
        assert fields["ContentType"] == message.content_type
        assert fields["CorrelationId"] == message.correlation_id
        assert fields["Subject"] == fields["Label"] == message.subject
        assert fields["MessageId"] == message.message_id
        assert fields["ReplyTo"] == message.reply_to
        assert fields["ReplyToSessionId"] == message.reply_to_session_id
        assert fields["SessionId"] == message.session_id
        assert fields["To"] == message.to
    assert read[0][0]["ReplyToSessionId"] == "rs-1" and read[1][0]["ContentType"] is None
