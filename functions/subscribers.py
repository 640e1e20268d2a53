"""Service Bus queue triggers: one per catalog endpoint's input queue, made by one factory.

``blueprint(env)`` declares them with the queue paths of the current app settings, hierarchy prefix
included (:mod:`shared.entity_paths`). Each function uses the SDK-type binding
(``azurefunctions-extensions-bindings-servicebus``): it receives the SDK's ``ServiceBusReceivedMessage``
and a ``ServiceBusMessageActions`` object, with ``auto_complete_messages=False``, and settles every
message itself: complete on success, dead-letter at once with a precise reason when the message can never
succeed (no retry storm), and abandon (immediate redelivery, so the broker dead-letters after
MaxDeliveryCount) when the failure may be transient.

The annotations must be the extension's classes (not ``azure.servicebus``'s) and must not be strings, since
the Python worker picks the binding by the annotation object; hence no ``from __future__ import annotations``.

Adding an endpoint is one module under ``app/endpoints/`` declaring an
:class:`~shared.handlers.endpoints.Endpoint` (:mod:`app.discovery`): its trigger is ``<endpoint>_subscriber``
(the worker indexes functions by that name).
"""

from collections.abc import Mapping

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from azure.servicebus import ServiceBusReceivedMessage

from app.runtime import CONNECTION, EnvironmentTransport, environment, held_keys, wire_namespace
from app.services import CATALOG
from functions.convert import incoming_from_received
from functions.monitored import monitoring
from shared.api.provisioning.service import entity_defaults
from shared.delivery import Settlement
from shared.entity_paths import endpoint_queue_path
from shared.handlers.dispatch import UNREADABLE_MESSAGE, DeadLetter, Outcome, Retry, truncate
from shared.handlers.endpoints import Endpoint
from shared.handlers.subscriber import HandlerFailed, process
from shared.messages import IncomingMessage
from shared.ordering.ordered import KeyHolding, process_ordered
from shared.telemetry.processing import processing
from shared.topology.names import held_queue

TRANSPORT = EnvironmentTransport()
"""The cached clients of the process environment, which the handlers' outgoing messages go through."""


def _handle(endpoint: Endpoint, queue: str, message: ServiceBusReceivedMessage, actions: Settlement) -> None:
    try:
        incoming = incoming_from_received(message)
    except Exception as error:  # a message that cannot be read never will be: no retry storm
        description = truncate(f"the message cannot be read: {type(error).__name__}: {error}")
        actions.deadletter(
            message, deadletter_reason=UNREADABLE_MESSAGE, deadletter_error_description=description
        )
        return
    outcome = _process(endpoint, queue, incoming)
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


def _process(endpoint: Endpoint, queue: str, incoming: IncomingMessage) -> Outcome:
    if not endpoint.ordered:
        return process(endpoint, incoming, TRANSPORT)
    env = environment()
    holding = KeyHolding(
        queue=queue,
        held_queue=held_queue(queue),
        keys=held_keys(env),
        client=TRANSPORT.service_bus_client(),
        max_delivery_count=entity_defaults(env).max_delivery_count,
        namespace=wire_namespace(env),
    )
    return process_ordered(endpoint, incoming, TRANSPORT, holding)


def subscriber_name(endpoint: Endpoint) -> str:
    """The trigger's function name: ``<endpoint>_subscriber`` (pinned by tests and by the host's logs)."""
    return f"{endpoint.name}_subscriber"


def register_subscriber(bp: func.Blueprint, endpoint: Endpoint, env: Mapping[str, str]) -> None:
    """Declare ``endpoint``'s queue trigger on ``bp``, bound to its queue path under ``env``'s hierarchy
    namespace (see :mod:`shared.entity_paths`: a binding expression could not add the prefix)."""
    name = subscriber_name(endpoint)
    queue = endpoint_queue_path(endpoint, env)
    observers = (monitoring(queue),)  # made once: the same observer serves every delivery

    def subscriber(
        message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
    ) -> None:
        # The delivery's process span (continuing the message's trace) and its metrics, and the console's
        # per-minute monitoring: both fed from the one observation of the settlement.
        with processing(
            endpoint.name,
            queue,
            properties=message.application_properties,
            actions=message_actions,
            message_id=message.message_id,
            delivery_count=message.delivery_count,
            enqueued_time=message.enqueued_time_utc,
            observers=observers,
        ) as actions:
            _handle(endpoint, queue, message, actions)

    subscriber.__name__ = subscriber.__qualname__ = name
    subscriber.__doc__ = f"The {endpoint.name} endpoint's input queue."
    # An ordered endpoint's queue requires sessions: the host then hands over one message at a time per
    # session (key), in order, and keeps the session locked for the invocation.
    trigger = bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=queue,
        connection=CONNECTION,
        auto_complete_messages=False,
        is_sessions_enabled=endpoint.ordered,
    )
    bp.function_name(name)(trigger(subscriber))


def blueprint(env: Mapping[str, str]) -> func.Blueprint:
    """One queue trigger per endpoint of the app's catalog (:data:`app.services.CATALOG`)."""
    bp = func.Blueprint()  # type: ignore[no-untyped-call]
    for endpoint in CATALOG:
        register_subscriber(bp, endpoint, env)
    return bp
