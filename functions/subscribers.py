"""Service Bus queue triggers: one per sample endpoint's input queue.

Each function binds to the SDK type (``ServiceBusReceivedMessage``) with a ``ServiceBusMessageActions``
parameter so it can dead-letter a message that can never succeed at once, with a precise reason; the host's
``autoCompleteMessages`` completes on success and abandons (redelivery) on an exception.
"""

from __future__ import annotations

import azure.functions as func
from azure.servicebus import ServiceBusReceivedMessage

from functions.convert import incoming_from_received
from functions.message_actions import ServiceBusMessageActions
from shared.dispatch import UNREADABLE_MESSAGE, DeadLetter, Retry, truncate
from shared.endpoints import Endpoint
from shared.runtime import CONNECTION
from shared.services import CATALOG
from shared.subscriber import HandlerFailed, process

bp = func.Blueprint()  # type: ignore[no-untyped-call]


def _endpoint(name: str) -> Endpoint:
    endpoint = CATALOG.get(name)
    assert endpoint is not None, name
    return endpoint


def _handle(
    endpoint: Endpoint, message: ServiceBusReceivedMessage, actions: ServiceBusMessageActions
) -> None:
    try:
        incoming = incoming_from_received(message)
    except Exception as error:  # a message that cannot be read never will be: no retry storm
        description = truncate(f"the message cannot be read: {type(error).__name__}: {error}")
        actions.deadletter(
            message, deadletter_reason=UNREADABLE_MESSAGE, deadletter_error_description=description
        )
        return
    outcome = process(endpoint, incoming)
    if isinstance(outcome, DeadLetter):
        actions.deadletter(
            message, deadletter_reason=outcome.reason, deadletter_error_description=outcome.description
        )
    elif isinstance(outcome, Retry):
        raise HandlerFailed(outcome.description) from outcome.error


@bp.function_name("billing_subscriber")
@bp.service_bus_queue_trigger(arg_name="message", queue_name="%BUSBAR_BILLING_QUEUE%", connection=CONNECTION)
def billing_subscriber(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    """The billing endpoint's input queue."""
    _handle(_endpoint("billing"), message, message_actions)


@bp.function_name("crm_subscriber")
@bp.service_bus_queue_trigger(arg_name="message", queue_name="%BUSBAR_CRM_QUEUE%", connection=CONNECTION)
def crm_subscriber(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    """The CRM endpoint's input queue."""
    _handle(_endpoint("crm"), message, message_actions)


@bp.function_name("shipping_subscriber")
@bp.service_bus_queue_trigger(arg_name="message", queue_name="%BUSBAR_SHIPPING_QUEUE%", connection=CONNECTION)
def shipping_subscriber(
    message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions
) -> None:
    """The shipping endpoint's input queue."""
    _handle(_endpoint("shipping"), message, message_actions)
