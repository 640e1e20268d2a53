"""Session ids as Azure takes them, through the unmodified azure-servicebus SDK: a session id that is not
a string (AMQP types group-id and the session filter as strings) is refused as an invalid field.

(A session locked by one receiver refusing a second one, SessionCannotBeLockedError, is pinned in
test_sessions.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import ServiceBusError

from tests.emulator.sdk_helpers import no_retry_client, peek_queue

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


def test_message_with_a_non_string_session_id_is_refused_and_nothing_is_enqueued(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    with no_retry_client(backend) as client, client.get_queue_sender(queue) as sender:
        with pytest.raises(ServiceBusError, match="SessionId must be a string"):
            sender.send_messages(AmqpAnnotatedMessage(data_body=b"x", properties={"group_id": 42}))
        # The sender stays usable: only the refused message is lost to the entity.
        sender.send_messages(ServiceBusMessage("after-refusal"))
    assert [str(m) for m in peek_queue(backend, queue)] == ["after-refusal"]


def test_session_receiver_for_a_non_string_session_id_is_refused(backend: Backend) -> None:
    queue = backend.create_queue(requires_session=True)
    with no_retry_client(backend) as client:
        receiver = client.get_queue_receiver(queue, session_id=42)  # type: ignore[arg-type]
        with pytest.raises(ServiceBusError, match="SessionId must be a string"), receiver:
            receiver.receive_messages(max_wait_time=1)
        with client.get_queue_receiver(queue, session_id="42") as by_string:
            assert by_string.session.session_id == "42"
