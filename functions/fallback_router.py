"""The fallback-topic router: a topic trigger on the fallback topic's catch-all router subscription.

For each event it bridges to the contract's dedicated topic when one exists and records events no other
subscription on the fallback topic matches (see :mod:`shared.router.decision`). A failure to bridge or to
archive raises, so the message is redelivered rather than lost (the host abandons it).

The message parameter uses the SDK-type binding class of ``azurefunctions-extensions-bindings-servicebus``
(the router needs the full SDK message: MessageId, SessionId and every property must survive the bridge).
The annotation must be that class itself, not a string: no ``from __future__ import annotations`` here.
"""

from collections.abc import Mapping

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from app import runtime, services
from functions.convert import incoming_from_received
from shared.entity_paths import fallback_topic_binding


def blueprint(env: Mapping[str, str]) -> func.Blueprint:
    """The router trigger on the fallback topic's path under ``env``'s hierarchy namespace."""
    bp = func.Blueprint()  # type: ignore[no-untyped-call]

    @bp.function_name("fallback_router")
    @bp.service_bus_topic_trigger(
        arg_name="message",
        topic_name=fallback_topic_binding(env),
        subscription_name="%BUSBAR_ROUTER_SUBSCRIPTION%",
        connection=runtime.CONNECTION,
    )
    def fallback_router(message: servicebus.ServiceBusReceivedMessage) -> None:
        """Bridge or record one event of the fallback topic."""
        services.fallback_router().route(incoming_from_received(message))

    return bp
