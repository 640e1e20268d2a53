"""The sample domain: four endpoints over the seeds' events, so ``make run`` shows real traffic.

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
delivered). Every handler notes what it handled in :data:`JOURNAL`, the sample's stand-in for a database,
which ``make run`` logs (and, with ``BUSBAR_PROBE_RECORD``, in the durable test probe of :mod:`app.probe`,
which the chaos run accounts with and the end-to-end tests read: the handlers run in the worker process).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from app import probe
from app.sample_events import (
    CustomerUpdated,
    ICustomerLifecycleEvent,
    InvoiceIssued,
    IOrderStatusChanged,
    OrderAccepted,
    OrderAcceptedV2,
    sample_registry,
)
from shared.app_settings import AppSetting
from shared.handlers import Endpoint, EndpointCatalog, HandlerContext, HandlerRegistry, PermanentHandlerError

logger = logging.getLogger("busbar.sample")

BILLING_QUEUE = AppSetting("BUSBAR_BILLING_QUEUE", "Input queue of the sample billing endpoint.", "billing")
CRM_QUEUE = AppSetting("BUSBAR_CRM_QUEUE", "Input queue of the sample CRM endpoint.", "crm")
SHIPPING_QUEUE = AppSetting(
    "BUSBAR_SHIPPING_QUEUE", "Input queue of the sample shipping endpoint.", "shipping"
)

SALES_QUEUE = AppSetting("BUSBAR_SALES_QUEUE", "Input queue of the sample sales endpoint.", "sales")

HIGH_VALUE = "amount >= 1000"
"""The condition of the sales endpoint's subscription: SQL over ``OrderAccepted``'s promoted ``amount``."""

SETTINGS: tuple[AppSetting, ...] = (BILLING_QUEUE, CRM_QUEUE, SHIPPING_QUEUE, SALES_QUEUE)


@dataclass(frozen=True, slots=True)
class HandledEvent:
    """One handler call: which endpoint, which contract arrived (concrete name) and the message id."""

    endpoint: str
    contract: str
    key: str  # the order or customer id
    message_id: str | None
    correlation_id: str | None
    detail: str = ""  # what the handler recorded (a customer's name)


class Journal:
    """A bounded, thread-safe record of handled events (the sample endpoints' "database")."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._entries: deque[HandledEvent] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def note(self, endpoint: str, contract: str, key: str, context: HandlerContext, detail: str = "") -> None:
        entry = HandledEvent(endpoint, contract, key, context.message_id, context.correlation_id, detail)
        with self._lock:
            self._entries.append(entry)
        probe.record(
            {
                "endpoint": endpoint,
                "contract": contract,
                "key": key,
                "message_id": context.message_id,
                "correlation_id": context.correlation_id,
                "delivery_count": context.incoming.delivery_count,
                "detail": detail,
            }
        )
        logger.info("%s handled %s for %s (message %s)", endpoint, contract, key, context.message_id)

    def entries(self, key: str | None = None) -> list[HandledEvent]:
        """Everything handled, oldest first; only entries about ``key`` when given."""
        with self._lock:
            return [e for e in self._entries if key is None or e.key == key]


JOURNAL = Journal()

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


def sample_catalog() -> EndpointCatalog:
    """The four sample endpoints (crm ordered, sales filtered by content)."""
    contracts = sample_registry()
    return EndpointCatalog(
        Endpoint("billing", BILLING_QUEUE, contracts, _billing),
        Endpoint("crm", CRM_QUEUE, contracts, _crm, ordered=True),
        Endpoint("shipping", SHIPPING_QUEUE, contracts, _shipping),
        Endpoint("sales", SALES_QUEUE, contracts, _sales),
    )
