"""The seeds' example events, used by the sample endpoints, the tests and the benchmarks.

- Shipping (``000_…`` / ``001_…``): ``OrderAccepted`` and ``OrderDeclined`` implement ``IOrderAccepted`` and
  ``IOrderStatusChanged``; ``OrderAcceptedV2`` is the evolved contract with the same interfaces.
- Tenant / CRM (``000_…`` "Multiplexing related events"): the customer lifecycle, all implementing
  ``ICustomerLifecycleEvent``.
- Billing: ``InvoiceIssued``, published by the billing endpoint when it handles an accepted order;
  ``PaymentReceived``, which no sample endpoint subscribes to (published on the fallback topic, it matches no
  subscription there, so the fallback router archives it as unrouted: ``NoMatchingSubscription``).

Ordering keys (the ``SessionId`` of every publish): the customer lifecycle by ``customer_id``, the Shipping
and Billing events by ``order_id``. Promoted properties (for subscriptions that route by content):
``OrderAccepted``'s ``amount`` and ``region``.
"""

from __future__ import annotations

from shared.handlers import ContractRegistry, Event


class IOrderStatusChanged(
    Event, contract="Shipping.IOrderStatusChanged", abstract=True, ordering_key="order_id"
):
    """Any change of an order's status."""

    order_id: str


class IOrderAccepted(Event, contract="Shipping.IOrderAccepted", abstract=True, ordering_key="order_id"):
    """An order was accepted (any version of the contract)."""

    order_id: str


class OrderAccepted(
    IOrderAccepted, IOrderStatusChanged, contract="Shipping.OrderAccepted", promoted=("amount", "region")
):
    """Shipping accepted an order. ``amount`` and ``region`` are promoted (application properties of the
    same names), so a subscriber can take only some orders: the sample's sales endpoint only those with
    ``amount >= 1000``."""

    amount: float = 0.0
    region: str = ""


class OrderDeclined(IOrderAccepted, IOrderStatusChanged, contract="Shipping.OrderDeclined"):
    """Shipping declined an order. (The seeds give it the same interfaces as ``OrderAccepted``.)"""

    reason: str = ""


class OrderAcceptedV2(IOrderAccepted, IOrderStatusChanged, contract="Shipping.OrderAcceptedV2"):
    """The evolved ``OrderAccepted`` contract."""

    amount: float = 0.0
    currency: str = "EUR"


class ICustomerLifecycleEvent(
    Event, contract="Tenant.ICustomerLifecycleEvent", abstract=True, ordering_key="customer_id"
):
    """Anything that happens to a customer."""

    customer_id: str


class CustomerCreated(ICustomerLifecycleEvent, contract="Tenant.CustomerCreated"):
    """A customer was created."""

    name: str = ""


class CustomerUpdated(ICustomerLifecycleEvent, contract="Tenant.CustomerUpdated"):
    """A customer was changed."""

    name: str = ""


class CustomerDeleted(ICustomerLifecycleEvent, contract="Tenant.CustomerDeleted"):
    """A customer was deleted."""


class InvoiceIssued(Event, contract="Billing.InvoiceIssued", ordering_key="order_id"):
    """Billing issued an invoice for an order."""

    order_id: str
    invoice_id: str
    amount: float = 0.0


class PaymentReceived(Event, contract="Billing.PaymentReceived", ordering_key="order_id"):
    """A customer paid for an order. No sample endpoint subscribes to it (yet)."""

    order_id: str
    amount: float = 0.0


SAMPLE_EVENTS: tuple[type[Event], ...] = (
    OrderAccepted,
    OrderDeclined,
    OrderAcceptedV2,
    CustomerCreated,
    CustomerUpdated,
    CustomerDeleted,
    InvoiceIssued,
    PaymentReceived,
)
"""Every concrete sample event."""


def sample_registry() -> ContractRegistry:
    """A registry holding every sample event and interface."""
    return ContractRegistry(*SAMPLE_EVENTS)
