"""Ordering per key through ``make run``'s app (issue 34's acceptance): the sample's crm is an ordered
endpoint (its queue requires sessions, ``Tenant.*`` events are keyed by ``customer_id``), so each customer's
updates are handled in publish order, and a dead-lettered update holds its customer until it is resolved.

The seed's check (``004_…``, "Verify"): 50 updates of one customer, their payloads out of order, published
one after another over HTTP, are handled in publish order; five customers interleaved each keep their own
order. A held key: ``Updated(a)``, ``Updated("")``, ``Updated(b)``, ``Updated(c)`` -> ``a`` handled, the
empty one dead-lettered, ``b`` and ``c`` not handled while other customers are; archiving the blocker
through the console's API releases ``b`` then ``c``. The same with ``make run`` killed (``kill -9`` of its
process group) while the key is held: the restart on the same data (the emulator's under ``.data/emulator``,
the held keys' rows in Azurite's tables under ``.data/azurite``) still holds the key, loses nothing, and
releases it in order.

What crm handled is read twice, from outside the app: the sample handlers' probe file
(``BUSBAR_PROBE_RECORD``, one fsynced line per handled event, ``detail`` = the customer's name) and make
run's own log lines ``crm handled Tenant.CustomerUpdated for <customer> (message <id>)``. The app's re-drive
timer is set off: it would archive the blocker by itself.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusSubQueue

from shared.handlers.dispatch import PERMANENT_HANDLER_ERROR
from shared.topology.messages import MESSAGE_ID
from tests.devhost.test_make_run import REPO, MakeRun
from tests.functions.handled_record import HandledRecord

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

CRM_QUEUE = "crm"  # local.settings.sample.json's BUSBAR_CRM_QUEUE, no hierarchy namespace
READY_SECONDS = 240.0  # start-up under a loaded machine (emulator, Azurite, provisioning, worker)
WAIT = 120.0
HANDLED_LINE = re.compile(r"crm handled Tenant\.CustomerUpdated for (\S+) \(message (\S+)\)")


def write_settings(path: Path, probe: HandledRecord) -> None:
    """make run's settings file: the sample's, with the handlers' probe on and the re-drive timer off."""
    document: dict[str, Any] = json.loads((REPO / "local.settings.sample.json").read_text())
    document["Values"].update(
        **probe.settings,
        BUSBAR_REDRIVE_SCHEDULE="0 0 0 1 1 *",  # once a year: the timer never archives the blocker here
    )
    path.write_text(json.dumps(document, indent=2))


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class OrderedApp:
    """One running ``make run`` (ready), its clients and what its crm handled."""

    def __init__(self, run: MakeRun, probe: HandledRecord) -> None:
        self.run = run
        self.probe = probe
        run.reader.wait_ready(timeout=READY_SECONDS)
        self.connection_string = run.banner("Service Bus connection string")
        self.http = httpx.Client(
            base_url=run.base_url, headers={"x-functions-key": run.banner("Host key")}, timeout=60
        )
        self.admin = httpx.Client(
            base_url=run.base_url, headers={"x-functions-key": run.banner("Master key")}, timeout=60
        )

    def close(self) -> None:
        self.http.close()
        self.admin.close()

    def updated(self, customer: str, name: str) -> str:
        """Publish ``Tenant.CustomerUpdated`` over the app's HTTP API; its ``NServiceBus.MessageId`` (the
        broker's ``MessageId`` is a fresh one, as NServiceBus sets it: shared/topology/messages.py)."""
        response = self.http.post(
            "/api/events/Tenant.CustomerUpdated", json={"customer_id": customer, "name": name}
        )
        assert response.status_code == 202, response.text
        assert response.json()["sessionId"] == customer  # keyed by the customer: one session per customer
        return str(response.json()["sent"][0]["messageId"])

    def names(self, customer: str) -> list[str]:
        """The names crm recorded for ``customer``, in the order it handled them (the probe file)."""
        return [e.detail for e in self.probe.entries(customer) if e.endpoint == "crm"]

    def probed(self, customer: str) -> list[str | None]:
        """The broker MessageIds of what crm handled for ``customer``, in the probe file's order."""
        return [e.message_id for e in self.probe.entries(customer) if e.endpoint == "crm"]

    def logged(self, customer: str) -> list[str]:
        """The MessageIds make run logged as handled by crm for ``customer``, in log order."""
        matches = (HANDLED_LINE.search(line) for line in list(self.run.reader.lines))
        return [m.group(2) for m in matches if m is not None and m.group(1) == customer]

    def held(self, customer: str) -> dict[str, Any] | None:
        """The console's row for ``customer`` (``GET /api/ops/held``), or None when it flows."""
        response = self.admin.get("/api/ops/held")
        assert response.status_code == 200, response.text
        [crm] = [e for e in response.json()["endpoints"] if e["endpoint"] == "crm"]
        assert crm["queue"] == CRM_QUEUE
        rows = [row for row in crm["heldKeys"] if row["key"] == customer]
        return rows[0] if rows else None

    def dead_letters(self, customer: str) -> list[ServiceBusReceivedMessage]:
        """``customer``'s messages in crm's dead-letter queue (peeked: they stay there)."""
        with ServiceBusClient.from_connection_string(self.connection_string) as client:
            receiver = client.get_queue_receiver(
                CRM_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
            )
            with receiver:
                return [m for m in receiver.peek_messages(max_message_count=250) if m.session_id == customer]

    def archive(self, sequence_number: int) -> None:
        """Archive a dead letter of crm through the console's API."""
        archived = self.admin.post(
            "/api/ops/failures/archive", json={"entity": CRM_QUEUE, "sequenceNumbers": [sequence_number]}
        )
        assert archived.status_code == 200, archived.text
        assert archived.json()["summary"]["totals"]["archived"] == 1, archived.text


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrderedApp]:
    """One ``make run`` for the tests that need no restart."""
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    root = tmp_path_factory.mktemp("ordering")
    probe = HandledRecord(root / "probe.jsonl")
    write_settings(root / "local.settings.json", probe)  # where MakeRun points SETTINGS
    run = MakeRun(root / "data")
    try:
        running = OrderedApp(run, probe)
        yield running
        running.close()
        run.interrupt()
    finally:
        run.kill()


@pytest.mark.timeout(600)
def test_fifty_updates_of_one_customer_with_out_of_order_payloads_are_handled_in_publish_order(
    app: OrderedApp,
) -> None:
    customer = fresh("c")
    payloads = [f"v{n:02d}" for n in range(1, 51)]
    random.Random(34).shuffle(payloads)  # the payloads say nothing about the order: the publish order does
    published = [app.updated(customer, name) for name in payloads]
    wait_for(lambda: len(app.names(customer)) >= 50, "crm to handle 50 updates")
    assert app.names(customer) == payloads
    # make run's log says the same: 50 distinct messages handled, in the probe's order.
    wait_for(lambda: len(app.logged(customer)) >= 50, "make run to log 50 handled updates")
    assert app.logged(customer) == app.probed(customer) and len(set(app.logged(customer))) == 50
    assert len(set(published)) == 50


@pytest.mark.timeout(600)
def test_five_interleaved_customers_each_keep_their_own_order(app: OrderedApp) -> None:
    # Each customer's publisher sends its updates one after another while the four others do the same:
    # the customers' messages interleave on the topic and the queue, each customer's back to back.
    customers = [fresh(f"i{n}") for n in range(5)]
    sent = {c: [f"{c}-{n:02d}" for n in random.Random(c).sample(range(20), 20)] for c in customers}

    def publish(customer: str) -> None:
        for name in sent[customer]:
            app.updated(customer, name)

    with ThreadPoolExecutor(max_workers=len(customers)) as publishers:
        for publisher in [publishers.submit(publish, c) for c in customers]:
            publisher.result()
    wait_for(lambda: all(len(app.names(c)) >= 20 for c in customers), "crm to handle every customer")
    assert {c: app.names(c) for c in customers} == sent
    wait_for(lambda: all(len(app.logged(c)) >= 20 for c in customers), "the handled log lines")
    assert {c: app.logged(c) for c in customers} == {c: app.probed(c) for c in customers}


def hold_a_customer(app: OrderedApp) -> tuple[str, ServiceBusReceivedMessage]:
    """``Updated(a)``, ``Updated("")``, ``Updated(b)``, ``Updated(c)`` for a fresh customer while another
    customer's updates flow; returns once ``b`` and ``c`` are parked: the customer and its dead letter."""
    held, other = fresh("held"), fresh("other")
    app.updated(held, "a")
    blocker = app.updated(held, "")
    app.updated(held, "b")
    app.updated(held, "c")
    for n in range(3):  # another customer keeps flowing meanwhile
        app.updated(other, f"o{n}")
    wait_for(lambda: app.names(other) == ["o0", "o1", "o2"], "the other customer's updates")
    wait_for(lambda: bool(app.dead_letters(held)), "the empty name to be dead-lettered")
    wait_for(lambda: (row := app.held(held)) is not None and row["parked"] == 2, "b and c parked")
    [dead] = app.dead_letters(held)
    assert dead.dead_letter_reason == PERMANENT_HANDLER_ERROR
    assert dead.application_properties is not None
    assert dead.application_properties[MESSAGE_ID.encode()] == blocker.encode()  # the empty one
    row = app.held(held)
    assert row is not None and row["status"] == "held"
    assert (row["blockerMessageId"], row["blockerSequenceNumber"]) == (dead.message_id, dead.sequence_number)
    assert app.names(held) == ["a"]  # b and c are held, not handled
    return held, dead


def release_in_order(app: OrderedApp, held: str, dead: ServiceBusReceivedMessage, names: list[str]) -> None:
    """Archive ``held``'s blocker through the console: its parked updates are handled, in order."""
    assert dead.sequence_number is not None
    app.archive(dead.sequence_number)
    wait_for(lambda: len(app.names(held)) >= len(names), "the parked updates after the blocker was archived")
    assert app.names(held) == names
    wait_for(lambda: app.held(held) is None, "the customer to flow again")
    assert app.dead_letters(held) == []  # archived: out of the dead-letter queue
    app.updated(held, "after")
    wait_for(lambda: len(app.names(held)) > len(names), "a newer update after the release")
    assert app.names(held) == [*names, "after"]


@pytest.mark.timeout(600)
def test_a_dead_lettered_update_holds_its_customer_until_archived_through_the_console(
    app: OrderedApp,
) -> None:
    held, dead = hold_a_customer(app)
    # Still held a while later: nothing but the console (or the re-drive, off here) resolves it.
    newer = fresh("later")
    app.updated(newer, "x")
    wait_for(lambda: app.names(newer) == ["x"], "an update of a third customer")
    assert app.names(held) == ["a"] and (app.held(held) or {}).get("parked") == 2
    release_in_order(app, held, dead, ["a", "b", "c"])


@pytest.mark.timeout(900)
def test_a_held_customer_survives_kill_9_of_make_run_and_is_released_in_order_after_the_restart(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    probe = HandledRecord(tmp_path / "probe.jsonl")
    write_settings(tmp_path / "local.settings.json", probe)
    data_dir = tmp_path / "data"
    runs: list[MakeRun] = []
    try:
        first = MakeRun(data_dir)
        runs.append(first)
        app = OrderedApp(first, probe)
        held, dead = hold_a_customer(app)
        app.close()
        first.kill()  # kill -9 of make run's process group while the key is held

        second = MakeRun(data_dir)
        runs.append(second)
        app = OrderedApp(second, probe)
        # Nothing lost: the blocker is still dead-lettered, the key still held with b and c parked ...
        assert [(m.message_id, m.sequence_number) for m in app.dead_letters(held)] == [
            (dead.message_id, dead.sequence_number)
        ]
        row = app.held(held)
        assert row is not None and row["status"] == "held" and row["parked"] == 2, row
        assert row["blockerSequenceNumber"] == dead.sequence_number
        # ... and still holding: an update published after the restart is parked behind them, while another
        # customer's is handled.
        app.updated(held, "d")
        other = fresh("restarted")
        app.updated(other, "y")
        wait_for(lambda: app.names(other) == ["y"], "another customer's update after the restart")
        wait_for(lambda: (app.held(held) or {}).get("parked") == 3, "d parked behind b and c")
        assert app.names(held) == ["a"]
        release_in_order(app, held, dead, ["a", "b", "c", "d"])
        app.close()
        second.interrupt()
    finally:
        for run in runs:
            run.kill()
