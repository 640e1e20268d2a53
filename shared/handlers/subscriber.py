"""One endpoint's message processing: dispatch, then send what the handlers produced.

The Service Bus-triggered function (``functions/subscribers.py``) converts the trigger's message, calls
:func:`process` with the endpoint's :class:`Transport` and settles according to the outcome:

- :class:`~shared.handlers.dispatch.Complete`: the outgoing messages are already sent; the host completes
  the message.
- :class:`~shared.handlers.dispatch.DeadLetter`: the function dead-letters it at once with the reason and
  description.
- :class:`~shared.handlers.dispatch.Retry`: the function raises :class:`HandlerFailed`; the host abandons
  the message and the broker redelivers it until ``MaxDeliveryCount``.

Each endpoint handles a message id once (:mod:`shared.idempotency`): the handlers' rows and outgoing
messages commit with the record of the message id before anything is sent. If sending then fails, the
exception propagates and the message is retried: the record is found and its outgoing messages are sent
again (with the same ids), without running the handlers.
"""

from __future__ import annotations

import logging
from typing import Protocol

from azure.servicebus import ServiceBusClient

from shared.handlers.dispatch import Complete, DeadLetter, Outcome, Retry
from shared.handlers.endpoints import Endpoint
from shared.handlers.outgoing import dispatch_outgoing
from shared.idempotency.once import handle_once
from shared.idempotency.records import HandledRecords
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

    def handled_records(self) -> HandledRecords:
        """Where the endpoints record the message ids they handled (:mod:`shared.idempotency`)."""
        ...


def process(endpoint: Endpoint, message: IncomingMessage, transport: Transport) -> Outcome:
    """Run ``endpoint``'s handlers for ``message`` once per message id and send what they produced."""

    def dispatch(outcome: Complete) -> None:
        # Ids derived from the handled message's: a dispatch repeated (from the record, after a crash or for
        # a twin copy) sends the same ids, and the broker's duplicate detection drops the copies.
        dispatch_outgoing(
            outcome,
            transport.publisher(endpoint.name),
            transport.service_bus_client(),
            incoming_message_id=message.message_id,
        )

    outcome, ran = handle_once(endpoint, message, transport.handled_records(), dispatch)
    if isinstance(outcome, Complete) and not ran:
        log.info(
            "%s already handled message %s: completed without its handlers", endpoint.name, message.message_id
        )
    elif isinstance(outcome, Complete):
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
