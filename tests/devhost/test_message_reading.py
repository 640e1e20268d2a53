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
