"""The retry path under devhost + the emulator: a handler failure that may be transient is not dead-lettered
by Busbar; the subscriber abandons the message, the broker redelivers it, and only the broker dead-letters it
(``MaxDeliveryCountExceeded``) once MaxDeliveryCount deliveries have all failed, exactly as in Azure.

The failure is injected where a real handler would meet it, in the sample's "database" (the journal), for
this test's own order ids only: the host runs Busbar's app through ``apps/flaky_shipping_app.py``, whose
journal in the worker process fails as many times as the test writes into a file, and which notes each
attempt there; what the handlers did handle is read from the app's test probe.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from app.endpoints.sample.events import InvoiceIssued
from devhost.testing import running_host
from emulator.server import EmulatorThread
from shared.api.provisioning.service import entity_defaults
from shared.contracts import ENCLOSED_MESSAGE_TYPES, enclosed_types_header
from shared.topology.queues import endpoint_queues
from tests.functions.busbar_app import (
    HOST_JSON,
    app_settings,
    create_queues_and_router,
    management_for,
    sdk_client_for,
)
from tests.functions.handled_record import HandledRecord

WAIT = 30.0
MAX_DELIVERY_COUNT = 4
FLAKY_APP = Path(__file__).parent / "apps" / "flaky_shipping_app.py"
FLAKY_DIR = (
    "BUSBAR_TEST_FLAKY_DIR"  # the app's setting: where the test sets its failures (never imported here)
)


def _queues_with_a_short_delivery_limit(settings: Mapping[str, str]) -> None:
    create_queues_and_router(settings)
    with management_for(settings) as management:
        group, namespace = management.scope
        # The queue keeps the duplicate detection it was created with: a PUT leaving it out would ask to turn
        # it off, which an existing queue refuses (RequiresDuplicateDetection cannot change).
        window = entity_defaults(settings).duplicate_detection_window
        [spec] = endpoint_queues(
            settings["BUSBAR_SHIPPING_QUEUE"], ordered=False, duplicate_detection_window=window
        )
        properties = SBQueueProperties(
            max_delivery_count=MAX_DELIVERY_COUNT,
            requires_duplicate_detection=spec.requires_duplicate_detection,
            duplicate_detection_history_time_window=spec.duplicate_detection_window,
        )
        management.queues.create_or_update(group, namespace, spec.name, SBQueue(properties=properties))


@dataclass(frozen=True, slots=True)
class Running:
    """The running app: its settings, what its handlers handled, and where its shipping failures are set."""

    settings: dict[str, str]
    record: HandledRecord
    flaky: Path


@pytest.fixture(scope="module")
def running(private_emulator: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    record = HandledRecord(tmp_path_factory.mktemp("handled") / "probe.jsonl")
    flaky = tmp_path_factory.mktemp("flaky")
    values = app_settings(private_emulator, **record.settings, **{FLAKY_DIR: str(flaky)})
    hook = _queues_with_a_short_delivery_limit
    with running_host(FLAKY_APP, settings=values, host_json=HOST_JSON, startup_hook=hook):
        yield Running(values, record, flaky)


def _invoice_for(order: str) -> ServiceBusMessage:
    return ServiceBusMessage(
        json.dumps({"order_id": order, "invoice_id": f"INV-{order}", "amount": 1.0}),
        message_id=f"msg-{order}",
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: enclosed_types_header(InvoiceIssued)},
    )


def _send_to_shipping(settings: dict[str, str], message: ServiceBusMessage) -> None:
    with (
        sdk_client_for(settings) as client,
        client.get_queue_sender(settings["BUSBAR_SHIPPING_QUEUE"]) as sender,
    ):
        sender.send_messages(message)


def _failing_journal(running: Running, order: str, failures: int) -> Callable[[], list[int]]:
    """Make the shipping handler fail ``failures`` times for ``order``; returns a reader of the attempts
    seen (the delivery count of each)."""
    (running.flaky / f"{order}.failures").write_text(str(failures))
    attempts = running.flaky / f"{order}.attempts"
    return lambda: [int(n) for n in attempts.read_text().splitlines()] if attempts.exists() else []


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _dead_letters(settings: dict[str, str], message_id: str, expect: bool) -> list[Any]:
    with (
        sdk_client_for(settings) as client,
        client.get_queue_receiver(
            settings["BUSBAR_SHIPPING_QUEUE"], sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver,
    ):
        deadline = time.monotonic() + (WAIT if expect else 1.0)
        while True:
            found = [m for m in receiver.peek_messages(max_message_count=100) if m.message_id == message_id]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


def test_a_transient_handler_failure_is_redelivered_until_the_handler_succeeds(running: Running) -> None:
    order = f"flaky-{uuid.uuid4().hex[:10]}"
    attempts = _failing_journal(running, order, failures=2)

    _send_to_shipping(running.settings, _invoice_for(order))

    _wait_for(
        lambda: [e.endpoint for e in running.record.entries(order)] == ["shipping"], "the third attempt"
    )
    assert attempts() == [1, 2, 3]  # the broker's delivery count of each attempt: redelivered each time
    assert [e.delivery_count for e in running.record.entries(order)] == [3]
    assert _dead_letters(running.settings, f"msg-{order}", expect=False) == []


def test_a_handler_that_keeps_failing_is_dead_lettered_by_the_broker_after_max_delivery_count(
    running: Running,
) -> None:
    order = f"doomed-{uuid.uuid4().hex[:10]}"
    attempts = _failing_journal(running, order, failures=10_000)

    _send_to_shipping(running.settings, _invoice_for(order))

    [dead] = _dead_letters(running.settings, f"msg-{order}", expect=True)
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert attempts() == list(range(1, MAX_DELIVERY_COUNT + 1))
    assert running.record.entries(order) == []
