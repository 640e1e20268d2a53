"""A billing-like endpoint twice, for bench/store_cost.py: with the handled-message store and without it.

Both functions take the sample's ``Shipping.OrderAccepted``, run the same handler (the sample billing
handler's work: read the order's ``invoice`` row, write it, publish an ``InvoiceIssued``) and settle the
message themselves, as ``functions/subscribers.py`` does (SDK-type binding, autoComplete off):

- ``with_store`` (``%STORE_QUEUE%``) goes through :func:`shared.handlers.subscriber.process`, the product's
  path: the record of the message id is read, the handler's row is read through to the table, the record and
  the row commit in one transaction, the outgoing event is published with its derived id, the record is
  marked dispatched (Table Storage: Azurite);
- ``without_store`` (``%BARE_QUEUE%``) runs the same dispatcher with a store that reads nothing and commits
  nothing, then publishes the outgoing event the same way (:func:`shared.handlers.outgoing.dispatch_outgoing`,
  same ids): what the endpoint cost before it handled each message id once.

Busbar has no setting to turn the store off (an endpoint always handles a message id once), hence this app.
"""

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from app.endpoints.sample.events import InvoiceIssued, OrderAccepted, sample_registry
from app.runtime import EnvironmentTransport
from functions.convert import incoming_from_received
from shared.app_settings import AppSetting
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry
from shared.handlers.dispatch import Complete, Outcome
from shared.handlers.outgoing import dispatch_outgoing
from shared.handlers.subscriber import HandlerFailed, process

INPUT = AppSetting("STORE_QUEUE", "The bench endpoint's input queue (with the store).", "store")
_handlers = HandlerRegistry()


@_handlers.handles(OrderAccepted)
def invoice(event: OrderAccepted, context: HandlerContext) -> None:
    """The sample billing handler's work: one row per order, one published event."""
    issued = InvoiceIssued(order_id=event.order_id, invoice_id=f"INV-{event.order_id}", amount=event.amount)
    if context.store.get("invoice") is not None:
        return
    context.store.put("invoice", issued.model_dump(mode="json"))
    context.publish(issued)


ENDPOINT = Endpoint("benchbilling", sample_registry(), _handlers)  # its queue is bound as %STORE_QUEUE%
TRANSPORT = EnvironmentTransport()

app = func.FunctionApp()


def _settle(outcome: Outcome, message: object, actions: servicebus.ServiceBusMessageActions) -> None:
    if isinstance(outcome, Complete):
        actions.complete(message)
    else:
        actions.abandon(message)
        raise HandlerFailed(str(outcome))


@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%STORE_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def with_store(
    msg: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    _settle(process(ENDPOINT, incoming_from_received(msg), TRANSPORT), msg, actions)


@app.service_bus_queue_trigger(
    arg_name="msg", queue_name="%BARE_QUEUE%", connection="ServiceBusConnection", auto_complete_messages=False
)
def without_store(
    msg: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    incoming = incoming_from_received(msg)
    outcome = ENDPOINT.dispatcher().dispatch(incoming)
    if isinstance(outcome, Complete) and outcome.outgoing:
        dispatch_outgoing(
            outcome,
            TRANSPORT.publisher(ENDPOINT.name),
            TRANSPORT.service_bus_client(),
            incoming_message_id=incoming.message_id,
        )
    _settle(outcome, msg, actions)
