"""The fallback-topic router: a topic trigger on the fallback topic's catch-all router subscription.

For each event it bridges to the contract's dedicated topic when one exists and records events no other
subscription on the fallback topic matches (see :mod:`shared.fallback_router`). A failure to bridge or to
archive raises, so the message is redelivered rather than lost (the host abandons it).

The message parameter uses the SDK-type binding class of ``azurefunctions-extensions-bindings-servicebus``
(the router needs the full SDK message: MessageId, SessionId and every property must survive the bridge).
The annotation must be that class itself, not a string: no ``from __future__ import annotations`` here.
"""

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from functions.convert import incoming_from_received
from shared import runtime

bp = func.Blueprint()  # type: ignore[no-untyped-call]


@bp.function_name("fallback_router")
@bp.service_bus_topic_trigger(
    arg_name="message",
    topic_name="%BUSBAR_FALLBACK_TOPIC%",
    subscription_name="%BUSBAR_ROUTER_SUBSCRIPTION%",
    connection=runtime.CONNECTION,
)
def fallback_router(message: servicebus.ServiceBusReceivedMessage) -> None:
    """Bridge or record one event of the fallback topic."""
    runtime.fallback_router().route(incoming_from_received(message))
