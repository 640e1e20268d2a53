"""Service Bus queue triggers: one per sample endpoint's input queue.

``blueprint(env)`` declares them with the queue paths of the current app settings, hierarchy prefix
included (:mod:`shared.entity_paths`). Each function uses the SDK-type binding
(``azurefunctions-extensions-bindings-servicebus``): it receives the SDK's ``ServiceBusReceivedMessage``
and a ``ServiceBusMessageActions`` object, with ``auto_complete_messages=False``, and settles every
message itself: complete on success, dead-letter at once with a precise reason when the message can never
succeed (no retry storm), and abandon (immediate redelivery, so the broker dead-letters after
MaxDeliveryCount) when the failure may be transient.

The annotations must be the extension's classes (not ``azure.servicebus``'s) and must not be strings, since
the Python worker picks the binding by the annotation object; hence no ``from __future__ import annotations``.
"""

from collections.abc import Mapping

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from azure.servicebus import ServiceBusReceivedMessage

from functions.convert import incoming_from_received
from functions.message_actions import MessageActions
from shared.dispatch import UNREADABLE_MESSAGE, DeadLetter, Retry, truncate
from shared.endpoints import Endpoint
from shared.entity_paths import endpoint_queue_path
from shared.runtime import CONNECTION
from shared.services import CATALOG
from shared.subscriber import HandlerFailed, process


def _endpoint(name: str) -> Endpoint:
    endpoint = CATALOG.get(name)
    assert endpoint is not None, name
    return endpoint


def _handle(endpoint: Endpoint, message: ServiceBusReceivedMessage, actions: MessageActions) -> None:
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
        # Released now rather than when the lock expires, as the host's autoComplete would; raising
        # afterwards reports the invocation as failed.
        actions.abandon(message)
        raise HandlerFailed(outcome.description) from outcome.error
    else:
        actions.complete(message)


def blueprint(env: Mapping[str, str]) -> func.Blueprint:
    """The three queue triggers, bound to the endpoints' queue paths under ``env``'s hierarchy namespace
    (see :mod:`shared.entity_paths`: a binding expression could not add the prefix)."""
    bp = func.Blueprint()  # type: ignore[no-untyped-call]
    billing, crm, shipping = _endpoint("billing"), _endpoint("crm"), _endpoint("shipping")

    @bp.function_name("billing_subscriber")
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=endpoint_queue_path(billing, env),
        connection=CONNECTION,
        auto_complete_messages=False,
    )
    def billing_subscriber(
        message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
    ) -> None:
        """The billing endpoint's input queue."""
        _handle(billing, message, message_actions)

    @bp.function_name("crm_subscriber")
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=endpoint_queue_path(crm, env),
        connection=CONNECTION,
        auto_complete_messages=False,
    )
    def crm_subscriber(
        message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
    ) -> None:
        """The CRM endpoint's input queue."""
        _handle(crm, message, message_actions)

    @bp.function_name("shipping_subscriber")
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=endpoint_queue_path(shipping, env),
        connection=CONNECTION,
        auto_complete_messages=False,
    )
    def shipping_subscriber(
        message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
    ) -> None:
        """The shipping endpoint's input queue."""
        _handle(shipping, message, message_actions)

    return bp
