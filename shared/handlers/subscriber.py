"""One endpoint's message processing: dispatch, then send what the handlers produced.

The Service Bus-triggered function (``functions/subscribers.py``) converts the trigger's message, calls
:func:`process` with the endpoint's :class:`Transport` and settles according to the outcome:

- :class:`~shared.handlers.dispatch.Complete`: the outgoing messages are already sent; the host completes
  the message.
- :class:`~shared.handlers.dispatch.DeadLetter`: the function dead-letters it at once with the reason and
  description.
- :class:`~shared.handlers.dispatch.Retry`: the function raises :class:`HandlerFailed`; the host abandons
  the message and the broker redelivers it until ``MaxDeliveryCount``.

If sending the outgoing messages fails, the exception propagates: the message is retried with its handlers
(handlers must be idempotent, as with any at-least-once broker).
"""

from __future__ import annotations

import logging
from typing import Protocol

from azure.servicebus import ServiceBusClient

from shared.handlers.dispatch import Complete, DeadLetter, Outcome, Retry
from shared.handlers.endpoints import Endpoint
from shared.handlers.outgoing import dispatch_outgoing
from shared.messages import IncomingMessage
from shared.topology.publisher import Publisher

log = logging.getLogger(__name__)


class HandlerFailed(RuntimeError):
    """A handler failed in a way that may succeed on redelivery."""


class Transport(Protocol):
    """Where an endpoint's outgoing messages go: the composition root supplies its cached clients.

    Asked only when the handlers produced something, so a message whose handlers send nothing needs no
    Service Bus connection settings at all.
    """

    def publisher(self, endpoint_name: str) -> Publisher:
        """The publisher of events on behalf of ``endpoint_name``."""
        ...

    def service_bus_client(self) -> ServiceBusClient:
        """The client commands are sent with."""
        ...


def process(endpoint: Endpoint, message: IncomingMessage, transport: Transport) -> Outcome:
    """Dispatch ``message`` to ``endpoint``'s handlers and send what they produced on success."""
    outcome = endpoint.dispatcher().dispatch(message)
    if isinstance(outcome, Complete):
        if outcome.outgoing:
            dispatch_outgoing(outcome, transport.publisher(endpoint.name), transport.service_bus_client())
        log.info(
            "%s handled %s (message %s) with %s",
            endpoint.name,
            outcome.event_type,
            message.message_id,
            ", ".join(outcome.handlers),
        )
    elif isinstance(outcome, DeadLetter):
        log.warning(
            "%s dead-letters message %s (delivery %s): %s: %s",
            endpoint.name,
            message.message_id,
            message.delivery_count,
            outcome.reason,
            outcome.description,
        )
    elif isinstance(outcome, Retry):
        log.warning(
            "%s will retry message %s (delivery %s): %s",
            endpoint.name,
            message.message_id,
            message.delivery_count,
            outcome.description,
        )
    return outcome
