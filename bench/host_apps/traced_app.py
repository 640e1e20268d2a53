"""A billing-like endpoint for bench/tracing_overhead.py, instrumented as ``functions/subscribers.py`` is.

``billing_like`` (``%TRACED_QUEUE%``) takes the sample's ``Shipping.OrderAccepted``, runs a handler that
publishes an ``InvoiceIssued`` (through :func:`shared.handlers.outgoing.dispatch_outgoing`: the publish span,
the message stamped with it) and settles the message through :func:`shared.telemetry.processing.processing`
(the process span and the processing metrics). ``app.telemetry.configure_telemetry`` installs the SDK when the
run's settings name an OTLP endpoint, and nothing otherwise: the same code, tracing on or off.
"""

import os

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from app.endpoints.sample.events import InvoiceIssued, OrderAccepted, sample_registry
from app.runtime import EnvironmentTransport
from app.telemetry import configure_telemetry
from functions.convert import incoming_from_received
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry
from shared.handlers.dispatch import Complete
from shared.handlers.outgoing import dispatch_outgoing
from shared.handlers.subscriber import HandlerFailed
from shared.telemetry.processing import processing

_handlers = HandlerRegistry()


@_handlers.handles(OrderAccepted)
def invoice(event: OrderAccepted, context: HandlerContext) -> None:
    """Publish one InvoiceIssued per order (the sample billing handler's outgoing message)."""
    context.publish(
        InvoiceIssued(order_id=event.order_id, invoice_id=f"INV-{event.order_id}", amount=event.amount)
    )


ENDPOINT = Endpoint("benchbilling", sample_registry(), _handlers)  # its queue is bound as %TRACED_QUEUE%
TRANSPORT = EnvironmentTransport()
configure_telemetry(os.environ)

app = func.FunctionApp()


@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%TRACED_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def billing_like(
    msg: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    with processing(
        ENDPOINT.name,
        os.environ["TRACED_QUEUE"],
        properties=msg.application_properties,
        actions=actions,
        message_id=msg.message_id,
        delivery_count=msg.delivery_count,
        enqueued_time=msg.enqueued_time_utc,
    ) as settlement:
        incoming = incoming_from_received(msg)
        outcome = ENDPOINT.dispatcher().dispatch(incoming)
        if not isinstance(outcome, Complete):
            settlement.abandon(msg)
            raise HandlerFailed(str(outcome))
        dispatch_outgoing(
            outcome,
            TRANSPORT.publisher(ENDPOINT.name),
            TRANSPORT.service_bus_client(),
            incoming_message_id=incoming.message_id,
        )
        settlement.complete(msg)
