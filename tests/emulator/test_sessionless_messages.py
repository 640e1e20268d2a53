"""What a session-enabled queue does with a message that has no SessionId, as an ordered endpoint's input
queue meets it: sent directly, and auto-forwarded by a topic subscription (Busbar's endpoints receive
through forwarding subscriptions). Entities are created through the backend (over the emulator's ARM
endpoint with azure-mgmt-servicebus too: ``also_over_arm``; against Azure with ``--backend=azure``),
messages travel through the unmodified azure-servicebus SDK.

Evidence:

* A direct send is refused by the service with AMQP ``amqp:not-allowed`` and the description "The SessionId
  was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled
  can only receive messages that have the SessionId set to a valid value." The .NET clients surface it as
  ``InvalidOperationException`` with that text (Particular/NServiceBus#5364, Microsoft.Azure.ServiceBus
  ``MessageSender.OnSendAsync``; JasperFx/wolverine#264 with Azure.Messaging.ServiceBus; the .NET AMQP
  exception mapping turns ``amqp:not-allowed`` into ``InvalidOperationException``). The Python SDK maps
  ``amqp:not-allowed`` to the base ``ServiceBusError`` carrying the description
  (``azure/servicebus/_transport/_pyamqp_transport.py``, ``_ERROR_CODE_TO_ERROR_MAPPING``).
* Auto-forwarded from a subscription: Azure's documents do not name this case. The auto-forwarding
  article says a transfer the destination cannot take dead-letters the message in the *source*
  (service-bus-auto-forwarding.md, service-bus-dead-letter-queues.md "Dead-lettering in auto forward
  scenarios": disabled, deleted or full destination, too many hops), and a user report of exactly this
  case (AymDev/MessengerAzureBundle#3, forwarding into a session-enabled queue) says the message "goes
  directly to dead-letter with the error: The SessionId was not set on a message, ...". No source states
  the ``DeadLetterReason`` Azure gives it, so that part is **not conclusive**: the emulator keeps the
  behaviour that loses nothing (the message stays in the subscription's dead-letter queue, where re-drive
  and the console see it) with a precise reason, named by the refused transfer's .NET exception type as
  for its other transfer failures (``InvalidOperationException``), and the send's refusal text as the
  description.
"""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

from tests.emulator.backends import Backend
from tests.emulator.sdk_helpers import (
    create_subscription,
    create_topic,
    no_retry_client,
    opened,
    peek,
    sdk_client,
    sorted_bodies,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.also_over_arm]

SESSION_ID_NOT_SET = (
    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session "
    "support enabled can only receive messages that have the SessionId set to a valid value."
)


def test_a_message_without_session_id_sent_to_a_session_queue_is_refused_with_azures_not_allowed_error(
    backend: Backend,
) -> None:
    queue = backend.create_queue(requires_session=True)

    with no_retry_client(backend) as client, client.get_queue_sender(queue) as sender:
        with pytest.raises(ServiceBusError) as raised:
            sender.send_messages(ServiceBusMessage("no session"))
        sender.send_messages(ServiceBusMessage("keyed", session_id="customer-1"))  # still usable
        with client.get_queue_receiver(queue, session_id="customer-1", max_wait_time=2) as receiver:
            received = [str(m) for m in receiver.peek_messages(max_message_count=10)]

    # amqp:not-allowed is the SDK's base ServiceBusError, not one of its subclasses.
    assert type(raised.value) is ServiceBusError
    assert SESSION_ID_NOT_SET in str(raised.value)
    assert received == ["keyed"]


def test_a_subscription_forwarding_a_message_without_session_id_into_a_session_queue_dead_letters_it_there(
    backend: Backend,
) -> None:
    endpoint_queue = backend.create_queue(requires_session=True)
    topic = create_topic(backend)
    subscription = create_subscription(backend, topic, "ordered-endpoint", forward_to=endpoint_queue)

    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        dead_letters = client.get_subscription_receiver(
            topic, subscription, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        )
        endpoint = client.get_queue_receiver(endpoint_queue, session_id="customer-1")
        with opened(sender, dead_letters, endpoint):
            sender.send_messages(
                [ServiceBusMessage("no session"), ServiceBusMessage("keyed", session_id="customer-1")]
            )
            (dead,) = peek(dead_letters)
            delivered = peek(endpoint)

    assert str(dead) == "no session"
    assert dead.dead_letter_reason == "InvalidOperationException"
    assert dead.dead_letter_error_description == SESSION_ID_NOT_SET
    assert sorted_bodies(delivered) == ["keyed"]
    assert delivered[0].session_id == "customer-1"
