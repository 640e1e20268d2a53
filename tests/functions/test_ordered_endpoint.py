"""An ordered endpoint under devhost + the emulator: one key's events are handled in publish order, and a
dead-lettered event holds its key until it is resolved (the sample's crm, ``Tenant.*`` keyed by customer).

The seed's check (``004_…``, "Verify"): 50 events of one customer, their payloads out of order, published
one after another over HTTP, are handled in publish order; five customers interleaved each keep their own
order. Then a held key: ``Updated(a)``, ``Updated("")``, ``Updated(b)``, ``Updated(c)`` -> ``a`` handled,
the empty one dead-lettered, ``b`` and ``c`` parked while other customers flow; archiving the blocker
through the console's API releases ``b`` then ``c``; retrying a blocker instead (the console's retry sends
it back with its MessageId) handles it, then the parked ones, in order.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusSubQueue

from devhost.testing import HostHandle, running_host
from emulator.server import EmulatorThread
from shared.handlers.dispatch import PERMANENT_HANDLER_ERROR
from shared.ordering.held_keys import held_keys_from_settings
from tests.functions.busbar_app import APP, HOST_JSON, app_settings, create_queues_and_router, sdk_client_for
from tests.functions.handled_record import HandledRecord

pytestmark = pytest.mark.timeout(300)
WAIT = 60.0


class App:
    def __init__(self, settings: dict[str, str], host: HostHandle, record: HandledRecord) -> None:
        self.settings = settings
        self.host = host
        self.record = record
        self.http = httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60
        )
        self.admin = httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.master_key}, timeout=60
        )

    def updated(self, customer: str, name: str) -> str:
        response = self.http.post(
            "/api/events/Tenant.CustomerUpdated", json={"customer_id": customer, "name": name}
        )
        assert response.status_code == 202, response.text
        assert response.json()["sessionId"] == customer
        return str(response.json()["sent"][0]["messageId"])

    def names(self, customer: str) -> list[str]:
        return [e.detail for e in self.record.entries(customer) if e.endpoint == "crm"]


@pytest.fixture(scope="module")
def app(private_emulator: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    record = HandledRecord(tmp_path_factory.mktemp("handled") / "probe.jsonl")
    # A short duplicate-detection window, so a console retry can be sent within the test.
    settings = app_settings(private_emulator, BUSBAR_DUPLICATE_DETECTION_WINDOW="PT1M", **record.settings)
    with running_host(
        APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
    ) as host:
        running = App(settings, host, record)
        subscribed = running.http.put(
            "/api/endpoints/crm/subscriptions", json={"events": ["Tenant.ICustomerLifecycleEvent"]}
        )
        assert subscribed.status_code == 201, subscribed.text
        yield running
        running.http.close()
        running.admin.close()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def dead_letters(app: App) -> list[Any]:
    with sdk_client_for(app.settings) as client:
        receiver = client.get_queue_receiver(
            app.settings["BUSBAR_CRM_QUEUE"], sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
        )
        with receiver:
            return list(receiver.peek_messages(max_message_count=100))


def test_fifty_events_of_one_customer_with_out_of_order_payloads_are_handled_in_publish_order(
    app: App,
) -> None:
    customer = fresh("c")
    payloads = [f"v{n:02d}" for n in range(1, 51)]
    random.Random(7).shuffle(payloads)  # the payloads say nothing about the order: the publish order does
    for name in payloads:
        app.updated(customer, name)
    wait_for(lambda: len(app.names(customer)) >= 50, "crm to handle 50 updates")
    assert app.names(customer) == payloads


def test_five_interleaved_customers_each_keep_their_own_order(app: App) -> None:
    customers = [fresh(f"i{n}") for n in range(5)]
    sent: dict[str, list[str]] = {c: [] for c in customers}
    for round_ in range(8):
        for customer in customers:
            name = f"{customer}-{round_}"
            app.updated(customer, name)
            sent[customer].append(name)
    wait_for(lambda: all(len(app.names(c)) >= 8 for c in customers), "crm to handle every customer")
    assert {c: app.names(c) for c in customers} == sent


def test_a_dead_lettered_event_holds_its_customer_until_archived_then_the_held_ones_go_in_order(
    app: App,
) -> None:
    held, other = fresh("held"), fresh("other")
    app.updated(held, "a")
    blocker = app.updated(held, "")
    app.updated(held, "b")
    app.updated(held, "c")
    for n in range(3):  # another customer keeps flowing meanwhile
        app.updated(other, f"o{n}")
    wait_for(lambda: app.names(other) == ["o0", "o1", "o2"], "the other customer's updates")
    wait_for(
        lambda: any(m.session_id == held for m in dead_letters(app)), "the empty name to be dead-lettered"
    )
    keys = held_keys_from_settings(app.settings)
    wait_for(
        lambda: (k := keys.get(app.settings["BUSBAR_CRM_QUEUE"], held)) is not None and k.parked == 2,
        "b and c parked",
    )
    assert app.names(held) == ["a"]  # b and c are held, not handled
    dead = next(m for m in dead_letters(app) if m.session_id == held)
    assert dead.dead_letter_reason == PERMANENT_HANDLER_ERROR
    row = keys.get(app.settings["BUSBAR_CRM_QUEUE"], held)
    assert row is not None and row.status == "held" and row.parked == 2
    assert row.blocker_sequence_number == dead.sequence_number
    del blocker  # the 202's messageId is NServiceBus's header; the broker id is the dead letter's
    console = app.admin.get("/api/ops/held")
    assert console.status_code == 200, console.text
    [crm] = console.json()["endpoints"]
    [shown] = [k for k in crm["heldKeys"] if k["key"] == held]
    assert (crm["endpoint"], shown["blockerMessageId"], shown["parked"]) == ("crm", dead.message_id, 2)
    assert shown["blockerSequenceNumber"] == dead.sequence_number and shown["since"]

    archived = app.admin.post(
        "/api/ops/failures/archive",
        json={"entity": app.settings["BUSBAR_CRM_QUEUE"], "sequenceNumbers": [dead.sequence_number]},
    )
    assert archived.status_code == 200, archived.text
    assert archived.json()["summary"]["totals"]["archived"] == 1
    wait_for(lambda: app.names(held) == ["a", "b", "c"], "b then c after the blocker was archived")
    wait_for(lambda: keys.get(app.settings["BUSBAR_CRM_QUEUE"], held) is None, "the key to flow again")
    app.updated(held, "d")
    wait_for(lambda: app.names(held) == ["a", "b", "c", "d"], "a newer update after the release")


def test_a_retried_blocker_that_fails_again_keeps_holding_its_key_and_its_parked_events(app: App) -> None:
    customer = fresh("retry")
    queue = app.settings["BUSBAR_CRM_QUEUE"]
    app.updated(customer, "")  # blocks: the customer cannot be recorded without a name
    app.updated(customer, "later")
    keys = held_keys_from_settings(app.settings)
    wait_for(
        lambda: (k := keys.get(queue, customer)) is not None and k.parked == 1, "the later update parked"
    )
    dead = next(m for m in dead_letters(app) if m.session_id == customer)
    retry = {"entity": queue, "sequenceNumbers": [dead.sequence_number]}
    # Inside crm's duplicate-detection window (PT1M here) the copy would be dropped by the broker: the
    # console's retry holds it (issue 35) and the blocker stays dead-lettered.
    held = app.admin.post("/api/ops/failures/retry", json=retry)
    assert held.status_code == 200, held.text
    assert held.json()["summary"]["totals"]["held"] == 1, held.text
    # Past the window the retry sends the blocker back with its MessageId: it fails again (an empty name
    # never succeeds), is dead-lettered anew, and still holds the key with the later update parked.
    deadline = time.monotonic() + 120  # the window (60 s) and the re-drive's margin after it
    while app.admin.post("/api/ops/failures/retry", json=retry).json()["summary"]["totals"]["redriven"] != 1:
        assert time.monotonic() < deadline, "the retry was never sent"
        time.sleep(1)
    wait_for(
        lambda: any(
            m.session_id == customer
            and m.message_id == dead.message_id
            and m.sequence_number != dead.sequence_number
            for m in dead_letters(app)
        ),
        "the retried blocker to be dead-lettered again",
    )
    row = keys.get(queue, customer)
    assert row is not None and row.blocker_message_id == dead.message_id and row.status == "held"
    assert row.parked == 1
    assert app.names(customer) == []
