"""The retry path under devhost + the emulator: a handler failure that may be transient is not dead-lettered
by Busbar; the subscriber abandons the message, the broker redelivers it, and only the broker dead-letters it
(``MaxDeliveryCountExceeded``) once MaxDeliveryCount deliveries have all failed, exactly as in Azure.

The failure is injected where a real handler would meet it, in the sample's "database" (the journal), for
this test's own order ids only.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from app.sample_endpoints import JOURNAL
from app.sample_events import InvoiceIssued
from devhost.testing import running_host
from emulator.server import EmulatorThread
from shared.contracts import ENCLOSED_MESSAGE_TYPES, enclosed_types_header
from shared.handlers.context import HandlerContext
from tests.functions.busbar_app import (
    APP,
    HOST_JSON,
    app_settings,
    create_queues_and_router,
    management_for,
    sdk_client_for,
)

WAIT = 30.0
MAX_DELIVERY_COUNT = 4


def _queues_with_a_short_delivery_limit(settings: Mapping[str, str]) -> None:
    create_queues_and_router(settings)
    with management_for(settings) as management:
        group, namespace = management.scope
        queue = SBQueue(properties=SBQueueProperties(max_delivery_count=MAX_DELIVERY_COUNT))
        management.queues.create_or_update(group, namespace, settings["BUSBAR_SHIPPING_QUEUE"], queue)


@pytest.fixture(scope="module")
def settings(private_emulator: EmulatorThread) -> Iterator[dict[str, str]]:
    values = app_settings(private_emulator)
    hook = _queues_with_a_short_delivery_limit
    # In-process worker: the tests inject failures into the app's JOURNAL (monkeypatch) and read it back,
    # which only works when the function code runs in this process.
    with running_host(APP, settings=values, host_json=HOST_JSON, startup_hook=hook, worker_process=False):
        yield values


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


def _failing_journal(monkeypatch: pytest.MonkeyPatch, order: str, failures: int) -> list[int | None]:
    """Make the shipping handler fail ``failures`` times for ``order``; returns the attempts seen."""
    attempts: list[int | None] = []
    note = JOURNAL.note

    def flaky_note(endpoint: str, contract: str, key: str, context: HandlerContext) -> None:
        if key == order and endpoint == "shipping":
            attempts.append(len(attempts) + 1)
            if len(attempts) <= failures:
                raise ConnectionError("the shipping database is unavailable")
        note(endpoint, contract, key, context)

    monkeypatch.setattr(JOURNAL, "note", flaky_note)
    return attempts


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


def test_a_transient_handler_failure_is_redelivered_until_the_handler_succeeds(
    settings: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    order = f"flaky-{uuid.uuid4().hex[:10]}"
    attempts = _failing_journal(monkeypatch, order, failures=2)

    _send_to_shipping(settings, _invoice_for(order))

    _wait_for(lambda: [e.endpoint for e in JOURNAL.entries(order)] == ["shipping"], "the third attempt")
    assert attempts == [1, 2, 3]
    assert _dead_letters(settings, f"msg-{order}", expect=False) == []


def test_a_handler_that_keeps_failing_is_dead_lettered_by_the_broker_after_max_delivery_count(
    settings: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    order = f"doomed-{uuid.uuid4().hex[:10]}"
    attempts = _failing_journal(monkeypatch, order, failures=10_000)

    _send_to_shipping(settings, _invoice_for(order))

    [dead] = _dead_letters(settings, f"msg-{order}", expect=True)
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert len(attempts) == MAX_DELIVERY_COUNT
    assert JOURNAL.entries(order) == []
