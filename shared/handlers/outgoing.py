"""Dispatching what handlers published and sent, after every handler of the incoming message succeeded.

Events go through the topology's :class:`~shared.topology.publisher.Publisher` (routing, stamps, a missing
topic warned about and dropped as in NServiceBus). Commands go to their queue with the same NServiceBus
headers and intent ``Send``; a missing queue raises, so the incoming message is retried (a unicast send to a
missing destination is always an error, in NServiceBus too).
"""

from __future__ import annotations

import logging
import uuid

from azure.servicebus import ServiceBusClient

from shared.handlers.context import OutgoingPublish, OutgoingSend
from shared.handlers.dispatch import Complete
from shared.topology.messages import MESSAGE_INTENT, build_message
from shared.topology.options import TopicRoutingMode
from shared.topology.publisher import Publisher

log = logging.getLogger(__name__)

SEND_INTENT = "Send"


def dispatch_outgoing(outcome: Complete, publisher: Publisher, client: ServiceBusClient) -> None:
    """Publish and send everything ``outcome`` carries, with the incoming correlation carried over."""
    events = [item.event for item in outcome.outgoing if isinstance(item, OutgoingPublish)]
    if events:
        result = publisher.publish(
            events,
            correlation_id=outcome.correlation_id,
            conversation_id=outcome.conversation_id,
            headers=outcome.headers,
        )
        for dropped in result.dropped:
            log.warning("%s was not published: topic %s does not exist", dropped.event, dropped.topic)
    for item in outcome.outgoing:
        if isinstance(item, OutgoingSend):
            message = build_message(
                item.message,
                TopicRoutingMode.NotMultiplexed,
                endpoint_name=publisher.endpoint_name,
                message_id=str(uuid.uuid4()),
                correlation_id=outcome.correlation_id,
                conversation_id=outcome.conversation_id,
                headers=outcome.headers,
            )
            properties = message.application_properties
            if properties is not None:
                properties[MESSAGE_INTENT] = SEND_INTENT
            with client.get_queue_sender(item.destination) as sender:
                sender.send_messages(message)
