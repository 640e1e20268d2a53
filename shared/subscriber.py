"""One endpoint's message processing: dispatch, then send what the handlers produced.

The Service Bus-triggered function (``functions/subscribers.py``) converts the trigger's message, calls
:func:`process` and settles according to the outcome:

- :class:`~shared.dispatch.Complete`: the outgoing messages are already sent; the host completes the message.
- :class:`~shared.dispatch.DeadLetter`: the function dead-letters it at once with the reason and description.
- :class:`~shared.dispatch.Retry`: the function raises :class:`HandlerFailed`; the host abandons the message
  and the broker redelivers it until ``MaxDeliveryCount``.

If sending the outgoing messages fails, the exception propagates: the message is retried with its handlers
(handlers must be idempotent, as with any at-least-once broker).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from shared import runtime
from shared.dispatch import Complete, DeadLetter, Outcome, Retry
from shared.endpoints import Endpoint
from shared.messages import IncomingMessage
from shared.outgoing import dispatch_outgoing

log = logging.getLogger(__name__)


class HandlerFailed(RuntimeError):
    """A handler failed in a way that may succeed on redelivery."""


def process(endpoint: Endpoint, message: IncomingMessage, env: Mapping[str, str] | None = None) -> Outcome:
    """Dispatch ``message`` to ``endpoint``'s handlers and send what they produced on success."""
    outcome = endpoint.dispatcher().dispatch(message)
    if isinstance(outcome, Complete):
        if outcome.outgoing:
            dispatch_outgoing(outcome, runtime.publisher(endpoint.name, env), runtime.service_bus_client(env))
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
