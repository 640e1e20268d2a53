"""Issue 35's acceptance under devhost + the emulator + Azurite: no duplicate side effects.

The sample app runs through ``apps/observed_outbox_app.py``: the app itself, plus a line per message each
endpoint takes (``deliveries.jsonl``: a copy the broker delivered shows even when its handlers do not run)
and faults the tests switch on by file. Every queue and topic has a 20 s duplicate-detection window
(``BUSBAR_DUPLICATE_DETECTION_WINDOW=PT20S``, the shortest Azure allows), so a test can send a copy past it.
The side effects are read where they are committed: the endpoints' records and the sample's rows (billing's
``invoice``, shipping's ``shipment``) in Table Storage, on an Azurite table service of this module's own,
which the last test stops and restarts.

billing's partition is ``billing|<order>`` (the ordering key of the order's events) and shipping's
``shipping|<order>``: a record per message id handled, the invoice and the shipment one row each.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusMessage

from app.endpoints.sample.events import InvoiceIssued, OrderAccepted
from devhost.testing import running_host
from emulator.server import EmulatorThread
from shared.idempotency.records import TABLE_NAME, HandledRecords
from shared.storage_tables import table_client
from shared.table_keys import table_key
from shared.topology.message_ids import outgoing_message_id
from shared.topology.messages import build_message
from shared.topology.options import TopicRoutingMode
from tests.azurite import start_table_service
from tests.functions.busbar_app import HOST_JSON, app_settings, create_queues_and_router, sdk_client_for
from tests.functions.handled_record import Handled, HandledRecord

WAIT = 60.0
WINDOW_SECONDS = 20
PAST_THE_WINDOW = WINDOW_SECONDS + 5  # seconds after a send when a copy is no longer a duplicate
OBSERVED_APP = Path(__file__).parent / "apps" / "observed_outbox_app.py"
OUTBOX_DIR = "BUSBAR_TEST_OUTBOX_DIR"  # the app's setting: where the test steers it (never imported here)
ORDER_ACCEPTED = OrderAccepted.contract_name


@dataclass
class TableService:
    """This module's Azurite table service: stopped and started again on the same port and data."""

    location: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    connection_string: str = ""

    def start(self) -> None:
        self.process, self.connection_string = start_table_service(self.location, self.port)

    def stop(self) -> None:
        """Stop it the way it saves its data first. Azurite keeps its data in LokiJS files saved every 5 s
        and when it is told to stop: the standalone ``azurite-table`` listens for SIGINT only
        (``dist/src/table/main.js``: ``process.once("SIGINT", ...)`` closes the server, which saves), unlike
        ``azurite`` (all services), which also takes SIGTERM; a SIGTERM or SIGKILL loses its last 5 s of
        writes, here the table itself when the test is young."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None


@dataclass
class App:
    """The running app: its settings, HTTP client, probe, steering directory and storage."""

    settings: dict[str, str]
    http: httpx.Client
    record: HandledRecord
    steer: Path
    storage: TableService
    records: HandledRecords = field(init=False)

    def __post_init__(self) -> None:
        self.records = HandledRecords(table_client(self.settings, TABLE_NAME))

    def publish(self, order: str, key: str | None = None) -> str:
        headers = {} if key is None else {"Idempotency-Key": key}
        payload = {"order_id": order, "amount": 5}
        response = self.http.post(f"/api/events/{ORDER_ACCEPTED}", json=payload, headers=headers)
        assert response.status_code == 202, response.text
        return str(response.json()["messageId"])

    def send_to_billing(self, message: ServiceBusMessage) -> None:
        with (
            sdk_client_for(self.settings) as client,
            client.get_queue_sender(self.settings["BUSBAR_BILLING_QUEUE"]) as sender,
        ):
            sender.send_messages(message)

    def deliveries(self, endpoint: str, message_id: str) -> list[dict[str, Any]]:
        """Each time ``endpoint`` took the message ``message_id`` (oldest first), as the app noted it."""
        path = self.steer / "deliveries.jsonl"
        if not path.exists():
            return []
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
        return [d for d in lines if d["endpoint"] == endpoint and d["message_id"] == message_id]

    def handled(self, endpoint: str, order: str) -> list[Handled]:
        """What ``endpoint``'s handler noted for ``order`` (the probe: a line per handler run to its end)."""
        return [e for e in self.record.entries(order) if e.endpoint == endpoint]

    def entities(self, endpoint: str, order: str, kind: str) -> list[dict[str, Any]]:
        """The ``kind`` entities (``record``: handled message ids; ``row``: the handlers' rows) of the
        order's partition at ``endpoint``."""
        partition = table_key(f"{endpoint}|{order}")
        return [dict(e) for e in self.records.rows(kind) if e["PartitionKey"] == partition]

    def recorded_ids(self, endpoint: str, order: str) -> list[str]:
        return sorted(str(e["MessageId"]) for e in self.entities(endpoint, order, "record"))

    def rows(self, endpoint: str, order: str) -> dict[str, dict[str, Any]]:
        return {str(e["Name"]): json.loads(e["Data"]) for e in self.entities(endpoint, order, "row")}

    def shipped_after(self, order: str) -> None:
        """Wait until ``order`` is shipped: everything an earlier copy could have caused has come by then
        (each path is first in, first out), so a duplicate effect would show."""
        wait_for(lambda: bool(self.handled("shipping", order)), f"{order} shipped")


def order_accepted(order: str, message_id: str) -> ServiceBusMessage:
    """``Shipping.OrderAccepted`` for ``order`` as Busbar publishes it, with the MessageId ``message_id``."""
    event = OrderAccepted(order_id=order, amount=5)
    return build_message(
        event, TopicRoutingMode.CorrelationFilter, endpoint_name="test-publisher", message_id=message_id
    )


def invoice_id_of(order_accepted_id: str) -> str:
    """The MessageId of the ``InvoiceIssued`` billing publishes handling ``order_accepted_id``."""
    return outgoing_message_id("billing", order_accepted_id, 0)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def app(private_emulator: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    storage = TableService(tmp_path_factory.mktemp("azurite"), _free_port())
    storage.start()
    try:
        record = HandledRecord(tmp_path_factory.mktemp("handled") / "probe.jsonl")
        steer = tmp_path_factory.mktemp("steer")
        settings = app_settings(
            private_emulator,
            AzureWebJobsStorage=storage.connection_string,
            BUSBAR_DUPLICATE_DETECTION_WINDOW=f"PT{WINDOW_SECONDS}S",
            BUSBAR_ROUTER_SNAPSHOT_SECONDS="0",
            **record.settings,
            **{OUTBOX_DIR: str(steer)},
        )
        with (
            running_host(
                OBSERVED_APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
            ) as host,
            httpx.Client(
                base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60
            ) as http,
        ):
            running = App(settings, http, record, steer, storage)
            for endpoint, events in (
                ("billing", [ORDER_ACCEPTED]),
                ("crm", ["Shipping.IOrderStatusChanged"]),
                ("shipping", [InvoiceIssued.contract_name]),
            ):
                response = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})
                assert response.status_code == 201, response.text
            yield running
            running.records.close()
    finally:
        storage.stop()


# ----------------------------------------------------------------------------------------------- tests


@pytest.mark.timeout(240)
def test_an_event_published_twice_with_one_idempotency_key_is_handled_once_by_every_subscriber(
    app: App,
) -> None:
    order, key = fresh("order"), fresh("key")

    first = app.publish(order, key)
    retried = app.publish(order, key)  # a client retrying after a timeout
    app.shipped_after(order)
    marker = fresh("marker")
    app.publish(marker, fresh("key"))
    app.shipped_after(marker)  # published after the retry: the retry's copy would have come by now
    wait_for(lambda: bool(app.handled("crm", marker)), "crm's marker")

    assert retried == first
    assert [d["ran"] for d in app.deliveries("billing", first)] == [True]
    assert app.recorded_ids("billing", order) == [first]
    assert [e.message_id for e in app.handled("billing", order)] == [first]  # invoiced once
    assert app.rows("billing", order) == {
        "invoice": {"order_id": order, "invoice_id": f"INV-{order}", "amount": 5.0}
    }
    assert [e.message_id for e in app.handled("crm", order)] == [first]
    invoice = invoice_id_of(first)
    assert [d["ran"] for d in app.deliveries("shipping", invoice)] == [True]  # one InvoiceIssued
    assert app.recorded_ids("shipping", order) == [invoice]
    assert [e.message_id for e in app.handled("shipping", order)] == [invoice]  # shipped once
    assert app.rows("shipping", order) == {"shipment": {"order_id": order, "invoice_id": f"INV-{order}"}}


@pytest.mark.timeout(240)
def test_the_same_event_published_with_two_idempotency_keys_is_two_events_handled_twice(app: App) -> None:
    order = fresh("order")

    # The second after the first is handled: two events for one order handled at the same moment would
    # both find no invoice (the sample reads its invoice row, which neither has committed yet).
    ids = [app.publish(order, fresh("key"))]
    app.shipped_after(order)
    ids.append(app.publish(order, fresh("key")))
    wait_for(lambda: len(app.handled("crm", order)) == 2, "crm handling both events")
    wait_for(lambda: all(app.deliveries("billing", i) for i in ids), "billing handling both events")
    app.shipped_after(order)

    assert ids[0] != ids[1]
    # Two events: every subscriber handled each (billing's handler ran for both, with a record of each)...
    assert sorted(e.message_id or "" for e in app.handled("crm", order)) == sorted(ids)
    assert [[d["ran"] for d in app.deliveries("billing", i)] for i in ids] == [[True], [True]]
    assert app.recorded_ids("billing", order) == sorted(ids)
    # ... and the sample's invoice is per order (its row is keyed by it): the second event for an order
    # billing has invoiced finds the invoice and issues none, so the order is shipped once.
    [invoiced] = app.handled("billing", order)
    assert invoiced.message_id in ids
    assert list(app.rows("billing", order)) == ["invoice"]
    assert app.recorded_ids("shipping", order) == [invoice_id_of(invoiced.message_id or "")]
    assert len(app.handled("shipping", order)) == 1


@pytest.mark.timeout(240)
def test_a_copy_sent_after_the_duplicate_detection_window_is_not_handled_again_nor_dispatched_again(
    app: App,
) -> None:
    order, message_id = fresh("order"), str(uuid.uuid4())
    sent_at = time.monotonic()
    app.send_to_billing(order_accepted(order, message_id))
    app.shipped_after(order)
    time.sleep(max(0.0, sent_at + PAST_THE_WINDOW - time.monotonic()))  # the broker forgets the id

    app.send_to_billing(order_accepted(order, message_id))  # accepted: past the window, not a duplicate
    wait_for(lambda: len(app.deliveries("billing", message_id)) == 2, "billing taking the copy")
    marker = fresh("marker")
    app.send_to_billing(order_accepted(marker, str(uuid.uuid4())))
    app.shipped_after(marker)  # a second InvoiceIssued, dispatched before the marker's, would be in by now

    # The copy reached billing and was completed without its handlers: the record says it was handled.
    assert [(d["ran"], d["outcome"]) for d in app.deliveries("billing", message_id)] == [
        (True, "Complete"),
        (False, "Complete"),
    ]
    assert [e.delivery_count for e in app.handled("billing", order)] == [1]
    assert app.recorded_ids("billing", order) == [message_id]
    # No second outgoing message: the record's were dispatched once; shipping took one InvoiceIssued.
    invoice = invoice_id_of(message_id)
    assert [d["ran"] for d in app.deliveries("shipping", invoice)] == [True]
    assert len(app.handled("shipping", order)) == 1
    assert list(app.rows("shipping", order)) == ["shipment"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("fault", "billing_deliveries"),
    [
        # The process is killed between the dispatch and marking the record dispatched (kill -9 there):
        # devhost abandons the worker's in-flight messages as the host does, and restarts the worker.
        ("die-after-dispatch", [(False, "Complete")]),
        # The storage account fails the moment after the dispatch: logged, the message is abandoned.
        ("fail-mark", [(True, "Retry"), (False, "Complete")]),
    ],
)
def test_a_handler_failing_after_its_outgoing_dispatch_is_retried_and_each_outgoing_message_is_handled_once(
    app: App, fault: str, billing_deliveries: list[tuple[bool, str]]
) -> None:
    """The outbox dispatches after the commit, so "after the dispatch" is the one point left where the
    outgoing messages are out and the incoming message is not completed, as billing's InvoiceIssued was
    when make run was killed (issue 35): the record is committed but not marked dispatched, and the
    redelivery dispatches it again."""
    order, message_id = fresh("order"), str(uuid.uuid4())
    (app.steer / f"{message_id}.{fault}").touch()
    marks = app.steer / f"{message_id}.marks"

    app.send_to_billing(order_accepted(order, message_id))
    wait_for(lambda: any(not d.get("ran", True) for d in app.deliveries("billing", message_id)), "the retry")
    wait_for(lambda: marks.exists() and len(marks.read_text().splitlines()) == 2, "the retry's dispatch")
    app.shipped_after(order)
    marker = fresh("marker")
    app.send_to_billing(order_accepted(marker, str(uuid.uuid4())))
    app.shipped_after(marker)

    # The handler ran once, its effects committed once; the retry found the record not dispatched and
    # dispatched it again (the second mark), with the same ids...
    assert not (app.steer / f"{message_id}.{fault}").exists()  # the fault struck
    assert [(d["ran"], d["outcome"]) for d in app.deliveries("billing", message_id)] == billing_deliveries
    assert [e.delivery_count for e in app.handled("billing", order)] == [1]
    assert app.recorded_ids("billing", order) == [message_id]
    assert marks.read_text().splitlines() == ["billing", "billing"]
    # ... so the broker dropped the second InvoiceIssued: shipping handled the one invoice once.
    invoice = invoice_id_of(message_id)
    assert [d["ran"] for d in app.deliveries("shipping", invoice)] == [True]
    assert app.recorded_ids("shipping", order) == [invoice]
    assert len(app.handled("shipping", order)) == 1


@pytest.mark.timeout(240)
def test_two_copies_of_one_message_id_handled_at_once_commit_one_effect(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """billing's queue drops a copy sent inside its window, so the second copy is sent past it while the
    first is held inside the handler (a gate in the test app): both copies then run billing's handler at
    once, as two instances would, and both try to commit."""
    order, message_id = fresh("order"), str(uuid.uuid4())
    entered = app.steer / f"{order}.entered"
    (app.steer / f"{order}.gate").touch()
    sent_at = time.monotonic()

    app.send_to_billing(order_accepted(order, message_id))
    wait_for(lambda: entered.exists() and len(entered.read_text().splitlines()) == 1, "the first copy")
    time.sleep(max(0.0, sent_at + PAST_THE_WINDOW - time.monotonic()))
    app.send_to_billing(order_accepted(order, message_id))
    wait_for(
        lambda: entered.exists() and len(entered.read_text().splitlines()) == 2,
        "the second copy in the handler beside the first",
    )
    (app.steer / f"{order}.release").touch()
    wait_for(lambda: len(app.deliveries("billing", message_id)) == 2, "both copies handled")
    app.shipped_after(order)
    marker = fresh("marker")
    app.send_to_billing(order_accepted(marker, str(uuid.uuid4())))
    app.shipped_after(marker)

    # Both ran the handler to its end (reported separately: two handler runs), one committed.
    assert [line.split()[0] for line in entered.read_text().splitlines()] == [message_id, message_id]
    assert len(app.handled("billing", order)) == 2
    assert sorted(d["ran"] for d in app.deliveries("billing", message_id)) == [False, True]
    assert app.recorded_ids("billing", order) == [message_id]
    assert list(app.rows("billing", order)) == ["invoice"]
    discarded = f"another copy of message {message_id} committed first; this copy's effects are discarded"
    assert any(discarded in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    # One effect downstream: one InvoiceIssued reached shipping, one shipment.
    invoice = invoice_id_of(message_id)
    assert [d["ran"] for d in app.deliveries("shipping", invoice)] == [True]
    assert app.recorded_ids("shipping", order) == [invoice]
    assert len(app.handled("shipping", order)) == 1


@pytest.mark.timeout(300)
def test_table_storage_stopped_and_restarted_while_events_flow_loses_nothing_and_handles_each_event_once(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """Azurite's table service is stopped (gracefully: it saves its data) and started again on the same
    port and data while orders are published; the messages that meet the outage are abandoned and
    retried. Last in this module: the other tests' storage is this one."""
    orders = [fresh("order") for _ in range(24)]
    published: dict[str, str] = {}
    stop_publishing = threading.Event()

    def publish_all() -> None:
        for order in orders:
            if stop_publishing.is_set():
                return
            published[order] = app.publish(order, fresh("key"))
            time.sleep(0.25)

    def unreachable_logged() -> bool:
        return any("storage unreachable for message" in r.getMessage() for r in list(caplog.records))

    publisher = threading.Thread(target=publish_all, name="publisher")
    publisher.start()
    try:
        wait_for(lambda: len(published) >= 6, "the first orders published")
        app.storage.stop()
        wait_for(unreachable_logged, "a message meeting the outage")
        app.storage.start()
    except BaseException:
        stop_publishing.set()
        raise
    finally:
        publisher.join(WAIT)
    assert len(published) == len(orders)
    wait_for(lambda: all(app.handled("shipping", o) for o in orders), "every order shipped", timeout=180)

    outage = [r for r in list(caplog.records) if "storage unreachable for message" in r.getMessage()]
    assert outage and all(r.levelno == logging.ERROR for r in outage)
    # Whichever endpoint's messages met the outage (the outage lasts until the first "unreachable" line, so
    # it may be crm's alone: it takes every order too, as Shipping.IOrderStatusChanged).
    retried = [
        d
        for order, message_id in published.items()
        for d in app.deliveries("billing", message_id)
        + app.deliveries("crm", message_id)
        + app.deliveries("shipping", invoice_id_of(message_id))
        if d.get("outcome") == "Retry"
    ]
    assert retried  # messages met the outage, and were retried rather than completed
    for order, message_id in published.items():
        invoice = invoice_id_of(message_id)
        for endpoint, handled_id in (("billing", message_id), ("shipping", invoice)):
            # Each copy was retried until one completed, none completed after it. Which delivery committed
            # depends on when the outage struck: in the handler (its store's read failed: the handlers ran
            # and failed, nothing committed), before the commit, in it (the batch may have committed with
            # its answer lost: a later delivery finds the record) or after it (marking the record dispatched
            # failed: the same); so how many deliveries ran the handlers says nothing, and the effects,
            # below, are what must be once.
            taken = app.deliveries(endpoint, handled_id)
            assert [d.get("outcome") for d in taken] == ["Retry"] * (len(taken) - 1) + ["Complete"], (
                endpoint,
                order,
                taken,
            )
        assert app.recorded_ids("billing", order) == [message_id]
        assert list(app.rows("billing", order)) == ["invoice"]
        assert app.recorded_ids("shipping", order) == [invoice]
        assert list(app.rows("shipping", order)) == ["shipment"]
