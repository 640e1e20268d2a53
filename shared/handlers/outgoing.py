"""Dispatching what handlers published and sent, after every handler of the incoming message succeeded.

Events go through the topology's :class:`~shared.topology.publisher.Publisher` (routing, stamps, a missing
topic warned about and dropped as in NServiceBus). Commands go to their queue with the same NServiceBus
headers and intent ``Send``, through one sender per destination queue for the outcome; a missing queue
raises, so the incoming message is retried (a unicast send to a missing destination is always an error, in
NServiceBus too).

Given the incoming message's id, every outgoing message's ``MessageId`` is derived from it, the endpoint and
the message's position (:func:`~shared.topology.message_ids.outgoing_message_id`): a dispatch repeated by
a retried handler sends the same ids, which the destinations' duplicate detection drops.
"""

from __future__ import annotations

import contextlib
import logging
import uuid

from azure.servicebus import ServiceBusClient, ServiceBusSender

from shared.handlers.context import OutgoingPublish, OutgoingSend
from shared.handlers.dispatch import Complete
from shared.telemetry.operations import SEND, producing
from shared.topology.message_ids import outgoing_message_id
from shared.topology.messages import MESSAGE_INTENT, build_message
from shared.topology.options import TopicRoutingMode
from shared.topology.publisher import Publisher

log = logging.getLogger(__name__)

SEND_INTENT = "Send"


def dispatch_outgoing(
    outcome: Complete,
    publisher: Publisher,
    client: ServiceBusClient,
    *,
    incoming_message_id: str | None = None,
) -> None:
    """Publish and send everything ``outcome`` carries, with the incoming correlation carried over.

    ``incoming_message_id``: the id of the message the handlers handled (its ``MessageId``). Each
    outgoing message then gets :func:`~shared.topology.message_ids.outgoing_message_id` of the endpoint
    (``publisher.endpoint_name``), that id and its position in ``outcome.outgoing``, so dispatching the same
    outcome again (a handler retried after its dispatch, an outbox dispatching again after a crash) sends
    the same ids and the broker's duplicate detection drops the copies. ``None``: fresh ids (nothing can
    recognise a repeat)."""
    ids = [
        str(uuid.uuid4())
        if incoming_message_id is None
        else outgoing_message_id(publisher.endpoint_name, incoming_message_id, position)
        for position in range(len(outcome.outgoing))
    ]
    published = [
        (item.event, ids[i]) for i, item in enumerate(outcome.outgoing) if isinstance(item, OutgoingPublish)
    ]
    if published:
        result = publisher.publish(
            [event for event, _ in published],
            correlation_id=outcome.correlation_id,
            conversation_id=outcome.conversation_id,
            headers=outcome.headers,
            message_ids=[message_id for _, message_id in published],
        )
        for dropped in result.dropped:
            log.warning("%s was not published: topic %s does not exist", dropped.event, dropped.topic)
    sends = [(i, item) for i, item in enumerate(outcome.outgoing) if isinstance(item, OutgoingSend)]
    if not sends:
        return
    # One sender per destination for the whole outcome (a sender is an AMQP link: opening one costs more
    # than a send), closed when the last command has gone, or when one fails; the sends keep their order.
    with contextlib.ExitStack() as open_senders:
        senders: dict[str, ServiceBusSender] = {}
        for position, item in sends:
            message = build_message(
                item.message,
                TopicRoutingMode.NotMultiplexed,
                endpoint_name=publisher.endpoint_name,
                message_id=ids[position],
                correlation_id=outcome.correlation_id,
                conversation_id=outcome.conversation_id,
                headers=outcome.headers,
            )
            properties = message.application_properties
            if properties is not None:
                properties[MESSAGE_INTENT] = SEND_INTENT
            key = item.destination.lower()  # Service Bus entity names ignore case: one queue, one sender
            sender = senders.get(key)
            if sender is None:
                sender = open_senders.enter_context(client.get_queue_sender(item.destination))
                senders[key] = sender
            with producing(item.destination, [message], operation=SEND):
                sender.send_messages(message)
