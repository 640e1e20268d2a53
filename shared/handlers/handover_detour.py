"""The subscriber's half of a handover (:mod:`shared.topology.handover`): a copy stamped for the endpoint's
queue may have a twin, so instead of handling it the subscriber sends it into the endpoint's handover
queue, whose duplicate detection lets one copy of each MessageId through, back to the endpoint's queue,
marked so it is handled then."""

from __future__ import annotations

import logging
from dataclasses import replace

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusAuthenticationError

from shared.envelope import PartitionKeyPolicy
from shared.envelope.sdk import to_message
from shared.messages import IncomingMessage
from shared.topology.handover import DETOURED_PROPERTY, HANDOVER_PROPERTY, handover_queue, stamped_queues

log = logging.getLogger(__name__)


def detour_of(message: IncomingMessage, queue: str) -> str | None:
    """The handover queue ``message`` goes through before the endpoint of ``queue`` handles it; None to
    handle it now (not stamped for ``queue``, or back from the handover queue)."""
    if message.application_properties.get(DETOURED_PROPERTY) is not None:
        return None
    stamped = {q.lower() for q in stamped_queues(message.application_properties.get(HANDOVER_PROPERTY))}
    return handover_queue(queue) if queue.lower() in stamped else None


def detoured_copy(message: IncomingMessage) -> ServiceBusMessage:
    """An exact copy of ``message`` (same MessageId: the handover queue's duplicate detection keys on it),
    marked as detoured."""
    properties = {**message.application_properties, DETOURED_PROPERTY: True}
    return to_message(replace(message, application_properties=properties), PartitionKeyPolicy.SESSION_WINS)


def send_through_handover(client: ServiceBusClient, message: IncomingMessage, handover: str) -> bool:
    """Send ``message`` into the handover queue; False when that queue is gone (a handover long over whose
    queue was deleted) or refuses this app: then the caller handles the message itself (at worst a
    duplicate, never a loss). Service Bus refuses the token for an entity that does not exist, so a missing
    queue shows as an authentication error."""
    try:
        with client.get_queue_sender(handover) as sender:
            sender.send_messages(detoured_copy(message))
    except (MessagingEntityNotFoundError, ServiceBusAuthenticationError) as exc:
        log.warning(
            "handover queue %s cannot be sent to (%s); message %s is handled without it",
            handover,
            type(exc).__name__,
            message.message_id,
        )
        return False
    log.info("message %s goes through handover queue %s", message.message_id, handover)
    return True


__all__ = ["detour_of", "detoured_copy", "send_through_handover"]
