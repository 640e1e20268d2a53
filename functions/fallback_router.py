"""The fallback-topic router: a topic trigger on the fallback topic's catch-all router subscription.

For each event it bridges to the contract's dedicated topic when one exists and records events no other
subscription on the fallback topic matches (see :mod:`shared.fallback_router`). A failure to bridge or to
archive raises, so the message is redelivered rather than lost.
"""

from __future__ import annotations

import azure.functions as func
from azure.servicebus import ServiceBusReceivedMessage

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
def fallback_router(message: ServiceBusReceivedMessage) -> None:
    """Bridge or record one event of the fallback topic."""
    runtime.fallback_router().route(incoming_from_received(message))
