"""The sample's four endpoints over the seeds' events (:mod:`app.endpoints.sample.events`), so ``make run``
shows real traffic.

- **billing** (queue ``BUSBAR_BILLING_QUEUE``) handles ``Shipping.OrderAccepted`` and
  ``Shipping.OrderAcceptedV2`` and publishes ``Billing.InvoiceIssued`` for each. An order with a negative
  amount can never be invoiced: the handler raises :class:`~shared.handlers.dispatch.PermanentHandlerError`.
- **crm** (queue ``BUSBAR_CRM_QUEUE``) handles two interfaces, polymorphically:
  ``Tenant.ICustomerLifecycleEvent`` (``CustomerCreated``, ``CustomerUpdated``, ``CustomerDeleted``) and
  ``Shipping.IOrderStatusChanged`` (``OrderAccepted``, ``OrderDeclined``, ``OrderAcceptedV2``). It is
  **ordered**: each customer's (and order's) events are handled one at a time in publish order, and a
  ``CustomerUpdated`` with an empty name (which it cannot record) is dead-lettered and holds that customer's
  later events until it is resolved (:mod:`shared.ordering`).
- **shipping** (queue ``BUSBAR_SHIPPING_QUEUE``) handles ``Billing.InvoiceIssued``: it ships invoiced orders.
- **sales** (queue ``BUSBAR_SALES_QUEUE``) handles ``Shipping.OrderAccepted`` only when ``amount >= 1000``
  (routing by content: its subscription holds that SQL rule over the promoted ``amount`` and no match-all
  rule, so the broker never delivers it a smaller order): it follows up high-value orders.

No endpoint handles ``Billing.PaymentReceived``: published, it is archived by the fallback router as unrouted.

billing keeps each invoice and shipping each shipment as a row of its own (``context.store``: committed with
the record of the handled message id, so each order is invoiced and shipped once however often a message is
delivered). Every handler notes what it handled in the sample's journal (:mod:`app.endpoints.sample.journal`).
"""

from __future__ import annotations

from app.endpoints.sample.events import (
    CustomerUpdated,
    ICustomerLifecycleEvent,
    InvoiceIssued,
    IOrderStatusChanged,
    OrderAccepted,
    OrderAcceptedV2,
    sample_registry,
)
from app.endpoints.sample.journal import JOURNAL
from shared.handlers import Endpoint, EndpointCatalog, HandlerContext, HandlerRegistry, PermanentHandlerError

HIGH_VALUE = "amount >= 1000"
"""The condition of the sales endpoint's subscription: SQL over ``OrderAccepted``'s promoted ``amount``."""


_billing = HandlerRegistry()
_crm = HandlerRegistry()
_shipping = HandlerRegistry()
_sales = HandlerRegistry()


def _invoice(endpoint: str, order_id: str, amount: float, contract: str, context: HandlerContext) -> None:
    if amount < 0:
        raise PermanentHandlerError(
            f"order {order_id} has a negative amount ({amount}) and cannot be invoiced"
        )
    invoice = InvoiceIssued(order_id=order_id, invoice_id=f"INV-{order_id}", amount=amount)
    # The invoice row commits with the record of this message id, once (shared.idempotency): a copy of the
    # message is never handled again; another event for the same order finds the order invoiced.
    if context.store.get("invoice") is not None:
        return
    context.store.put("invoice", invoice.model_dump(mode="json"))
    JOURNAL.note(endpoint, contract, order_id, context)
    context.publish(invoice)


@_billing.handles(OrderAccepted)
def invoice_accepted_order(event: OrderAccepted, context: HandlerContext) -> None:
    """Billing invoices an accepted order."""
    _invoice("billing", event.order_id, event.amount, event.contract_name, context)


@_billing.handles(OrderAcceptedV2)
def invoice_accepted_order_v2(event: OrderAcceptedV2, context: HandlerContext) -> None:
    """Billing invoices an accepted order published with the evolved contract."""
    _invoice("billing", event.order_id, event.amount, event.contract_name, context)


@_crm.handles(ICustomerLifecycleEvent)
def track_customer(event: ICustomerLifecycleEvent, context: HandlerContext) -> None:
    """CRM follows every customer lifecycle event; a customer without a name cannot be recorded."""
    if isinstance(event, CustomerUpdated) and not event.name.strip():
        raise PermanentHandlerError(f"customer {event.customer_id} has an empty name and cannot be recorded")
    detail = getattr(event, "name", "")
    JOURNAL.note("crm", _arrived_as(context, event), event.customer_id, context, detail)


@_crm.handles(IOrderStatusChanged)
def track_order_status(event: IOrderStatusChanged, context: HandlerContext) -> None:
    """CRM follows every order status change."""
    JOURNAL.note("crm", _arrived_as(context, event), event.order_id, context)


@_shipping.handles(InvoiceIssued)
def ship_invoiced_order(event: InvoiceIssued, context: HandlerContext) -> None:
    """Shipping ships an order once it is invoiced (the shipment row commits once with the message)."""
    if context.store.get("shipment") is not None:
        return
    context.store.put("shipment", {"order_id": event.order_id, "invoice_id": event.invoice_id})
    JOURNAL.note("shipping", event.contract_name, event.order_id, context)


@_sales.handles(OrderAccepted, where=HIGH_VALUE)
def follow_up_high_value_order(event: OrderAccepted, context: HandlerContext) -> None:
    """Sales follows up every high-value order (the broker delivers only those: ``where=`` above)."""
    JOURNAL.note("sales", event.contract_name, event.order_id, context, detail=f"{event.amount:g}")


def _arrived_as(context: HandlerContext, event: object) -> str:
    # The concrete contract on the wire (the handler sees it through an interface).
    return context.incoming.contract_type or type(event).__name__


_contracts = sample_registry()
BILLING = Endpoint("billing", _contracts, _billing)
CRM = Endpoint("crm", _contracts, _crm, ordered=True)
SHIPPING = Endpoint("shipping", _contracts, _shipping)
SALES = Endpoint("sales", _contracts, _sales)

ENDPOINTS: tuple[Endpoint, ...] = (BILLING, CRM, SHIPPING, SALES)
"""The four sample endpoints, as the app hosts them (crm ordered, sales filtered by content)."""


def sample_catalog() -> EndpointCatalog:
    """The four sample endpoints in a catalog of their own (what tests host without discovery)."""
    return EndpointCatalog(*ENDPOINTS)
