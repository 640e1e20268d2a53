"""The chaos run's load: events of every sample contract, posted to ``POST /api/events/{eventType}`` at a
steady rate, and what each accepted event is owed.

Every event carries a key of its own (its ``order_id`` or ``customer_id``), which the sample handlers record
(``app/probe.py``), so one accepted event is followed through every endpoint, including the
``Billing.InvoiceIssued`` billing publishes for it (same order id) that shipping handles.

What an event is owed (:func:`expected_outcomes`):

- ``Shipping.OrderAccepted`` / ``OrderAcceptedV2``: billing, crm and (through billing's invoice) shipping
  handle it. With a negative amount it is **poison**: billing can never invoice it (``PermanentHandlerError``)
  so it must end dead-lettered or archived for billing, while crm still handles it and shipping never sees it.
  An ``OrderAccepted`` of :data:`HIGH_VALUE_AMOUNT` or more is sales' too (its subscription's content filter,
  ``amount >= 1000``, lets only those through); amounts are drawn up to twice that, so about half qualify.
- ``Shipping.OrderDeclined`` and the ``Tenant.Customer*`` events: crm handles them.
- ``Billing.InvoiceIssued`` published directly: shipping handles it.
- ``Billing.PaymentReceived``: nobody subscribes to it. It is **unrouted**: on the fallback topic it matches
  no endpoint's subscription, so the fallback router (subscription :data:`ROUTER`) must archive it with
  decision ``NoMatchingSubscription``, and no endpoint may handle it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from bench.chaos_app import AppInfo

HANDLED = "handled"
POISON = "poison"  # must end dead-lettered or archived for that endpoint
UNROUTED = "unrouted"  # must end archived by the fallback router as NoMatchingSubscription, handled nowhere
ROUTER = "busbar-router"  # the fallback router's subscription (BUSBAR_ROUTER_SUBSCRIPTION of the sample)

# (contract, weight): every sample contract, orders most often (they fan out to three endpoints), payments
# (which nobody subscribes to) at a small share.
CONTRACTS: tuple[tuple[str, int], ...] = (
    ("Shipping.OrderAccepted", 4),
    ("Shipping.OrderAcceptedV2", 2),
    ("Shipping.OrderDeclined", 1),
    ("Tenant.CustomerCreated", 1),
    ("Tenant.CustomerUpdated", 1),
    ("Tenant.CustomerDeleted", 1),
    ("Billing.InvoiceIssued", 1),
    ("Billing.PaymentReceived", 1),
)
POISON_SHARE = 0.1  # of the orders billing invoices
HIGH_VALUE_AMOUNT = 1000.0
"""sales' threshold (``app.endpoints.sample.HIGH_VALUE``: ``amount >= 1000``)."""


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """One event to publish: its contract, unique key, JSON body and what each endpoint owes it."""

    contract: str
    key: str
    body: str
    expected: dict[str, str]

    @property
    def poison(self) -> bool:
        return POISON in self.expected.values()

    @property
    def unsubscribed(self) -> bool:
        return UNROUTED in self.expected.values()


def expected_outcomes(contract: str, poison: bool, amount: float = 0.0) -> dict[str, str]:
    """Per subscribing endpoint, what it owes an event of ``contract`` (see the module docstring)."""
    if contract in ("Shipping.OrderAccepted", "Shipping.OrderAcceptedV2"):
        if poison:
            return {"billing": POISON, "crm": HANDLED}
        owed = {"billing": HANDLED, "crm": HANDLED, "shipping": HANDLED}
        if contract == "Shipping.OrderAccepted" and amount >= HIGH_VALUE_AMOUNT:
            owed["sales"] = HANDLED
        return owed
    if contract == "Billing.InvoiceIssued":
        return {"shipping": HANDLED}
    if contract == "Billing.PaymentReceived":
        return {ROUTER: UNROUTED}
    return {"crm": HANDLED}


class EventFactory:
    """Seeded events: a weighted mix of every sample contract, a share of the orders poison."""

    def __init__(self, seed: int, prefix: str) -> None:
        self._random = random.Random(seed)
        self._prefix = prefix
        self._count = 0
        self._names = [name for name, _ in CONTRACTS]
        self._weights = [weight for _, weight in CONTRACTS]

    def next(self) -> PlannedEvent:
        self._count += 1
        contract = self._random.choices(self._names, self._weights)[0]
        key = f"{self._prefix}-{self._count:07d}"
        poison = contract.startswith("Shipping.OrderAccepted") and self._random.random() < POISON_SHARE
        body: dict[str, object]
        if contract.startswith("Shipping."):
            body = {"order_id": key}
            if contract != "Shipping.OrderDeclined":
                body["amount"] = -round(self._random.uniform(1, 500), 2) if poison else self._amount()
            else:
                body["reason"] = "out of stock"
        elif contract.startswith("Tenant."):
            body = {"customer_id": key}
            if contract != "Tenant.CustomerDeleted":
                body["name"] = f"customer {self._count}"
        elif contract == "Billing.PaymentReceived":
            body = {"order_id": key, "amount": self._amount()}
        else:
            body = {"order_id": key, "invoice_id": f"INV-{key}", "amount": self._amount()}
        amount = body.get("amount")
        owed = expected_outcomes(contract, poison, amount if isinstance(amount, float) else 0.0)
        return PlannedEvent(contract, key, json.dumps(body), owed)

    def _amount(self) -> float:
        return round(self._random.uniform(1, 2 * HIGH_VALUE_AMOUNT), 2)


@dataclass(frozen=True, slots=True)
class AcceptedEvent:
    """An event the app answered 202 for, and when its request was sent (wall clock, as the probe records)."""

    event: PlannedEvent
    accepted_at: float


@dataclass(slots=True)
class PublishLog:
    """What the publisher did: accepted events, and refusals by kind (not owed anything)."""

    accepted: list[AcceptedEvent] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Publisher(threading.Thread):
    """Posts one event every ``1 / rate`` seconds to the app ``current()`` names (None while it is down)."""

    def __init__(
        self, factory: EventFactory, rate: float, current: Callable[[], AppInfo | None], log: PublishLog
    ) -> None:
        super().__init__(name="chaos-publisher", daemon=True)
        self._factory = factory
        self._interval = 1.0 / rate
        self._current = current
        self.log = log
        self.stopping = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        with httpx.Client(timeout=15.0) as client:
            while not self.stopping.is_set():
                self.stopping.wait(max(0.0, next_at - time.monotonic()))
                next_at = max(next_at + self._interval, time.monotonic() - 1.0)
                if self.stopping.is_set():
                    break
                app = self._current()
                if app is None:
                    continue
                self._post(client, app, self._factory.next())

    def _post(self, client: httpx.Client, app: AppInfo, event: PlannedEvent) -> None:
        with self.log.lock:
            self.log.attempts += 1
        sent_at = time.time()
        try:
            response = client.post(
                f"{app.base_url}/api/events/{event.contract}",
                content=event.body,
                headers={"x-functions-key": app.host_key, "content-type": "application/json"},
            )
        except httpx.HTTPError as error:
            # Not answered: not accepted, so nothing is owed (it may still arrive: counted as unowed).
            with self.log.lock:
                self.log.refused[type(error).__name__] += 1
            return
        with self.log.lock:
            if response.status_code == 202:
                self.log.accepted.append(AcceptedEvent(event, sent_at))
            else:
                self.log.refused[f"HTTP {response.status_code}"] += 1
