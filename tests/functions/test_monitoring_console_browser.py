"""The console's monitoring view in a real headless Chromium (Playwright driving the distribution's
``chromium``), on the sample app under devhost as ``make run`` provisions it: after a burst of orders,
billing and shipping show non-zero throughput and processing time, counted in the worker process and read
back from the app's Table Storage (Azurite); and a message the app dead-lettered shows the trace its
``traceparent`` names beside its headers."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from playwright.sync_api import Browser, Locator, expect, sync_playwright

from app.bootstrap import provision
from devhost.testing import running_host
from emulator.server import EmulatorThread
from tests.functions.busbar_app import APP, HOST_JSON, app_settings
from tests.functions.handled_record import HandledRecord
from tests.functions.test_ops_console_browser import CHROMIUM, FLAGS

pytestmark = pytest.mark.timeout(240)

BURST = 12
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SEEN = 90_000
"""How long the page may take to show the numbers (ms): the worker writes them every 10 s and the page
refreshes every 15 s."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def sample_app(
    private_emulator: EmulatorThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    record = HandledRecord(tmp_path_factory.mktemp("handled") / "probe.jsonl")
    settings = app_settings(private_emulator, **record.settings)
    with running_host(APP, settings=settings, host_json=HOST_JSON, startup_hook=provision) as host:
        yield {"host": host, "settings": settings, "record": record}


def wait_until_handled(record: HandledRecord, orders: list[str]) -> None:
    wanted = {(endpoint, order) for order in orders for endpoint in ("billing", "shipping")}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if wanted <= {(e.endpoint, e.key) for e in record.entries()}:
            return
        time.sleep(0.1)
    raise AssertionError("the burst was not handled by billing and shipping in time")


def number(cell: Locator) -> float:
    """A cell's number ("12", "0.80", "3.4 ms", "1.20 s" -> ms); 0 for "—"."""
    text = cell.inner_text().strip()
    if text == "—":
        return 0.0
    value, _, unit = text.partition(" ")
    return float(value) * (1000 if unit == "s" else 1)


def test_after_a_burst_the_monitoring_view_shows_throughput_and_processing_time_of_billing_and_shipping(
    browser: Browser, sample_app: dict[str, Any]
) -> None:
    host, record = sample_app["host"], sample_app["record"]
    orders = [f"mon-{uuid.uuid4().hex[:8]}" for _ in range(BURST)]
    with httpx.Client(
        base_url=host.base_url, headers={"x-functions-key": host.function_key("publish_event")}
    ) as http:
        for order in orders:
            response = http.post("/api/events/Shipping.OrderAccepted", json={"order_id": order, "amount": 42})
            assert response.status_code == 202, response.text
    wait_until_handled(record, orders)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    for endpoint in ("billing", "shipping"):
        row = page.locator(f'#monitoring tr[data-monitor-endpoint="{endpoint}"]')
        handled = row.locator('td[data-metric="handled"]')
        expect(handled).not_to_have_text("0", timeout=SEEN)
        assert number(handled) > 0
        assert number(row.locator('td[data-metric="throughput"]')) > 0
        for metric in ("processingMedian", "processingP95", "criticalMedian", "criticalP95"):
            assert number(row.locator(f'td[data-metric="{metric}"]')) > 0, (endpoint, metric)
        # The minute the burst was handled in has its bar.
        expect(row.locator(".spark span:not(.empty)")).not_to_have_count(0)
    # Every endpoint of the app has its row; the queue column is the namespace's count now.
    expect(page.locator("#monitoring tr[data-monitor-endpoint] th")).to_have_text(
        ["billing", "crm", "shipping", "sales"]
    )
    queue = page.locator('#monitoring tr[data-monitor-endpoint="billing"] td[data-metric="queueLength"]')
    expect(queue).to_have_text(re.compile(r"^\d+$"))
    expect(page.locator("#monitoring-errors")).to_be_hidden()
    page.close()


def test_a_message_the_app_dead_lettered_shows_its_trace_next_to_its_headers_and_counts_as_dead_lettered(
    browser: Browser, sample_app: dict[str, Any]
) -> None:
    host, settings = sample_app["host"], sample_app["settings"]
    billing = settings["BUSBAR_BILLING_QUEUE"]
    traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    # No NServiceBus.EnclosedMessageTypes: billing cannot tell what it is and dead-letters it at once.
    unreadable = ServiceBusMessage(
        b"{}", message_id=uuid.uuid4().hex, application_properties={"traceparent": traceparent}
    )
    with (
        ServiceBusClient.from_connection_string(settings["ServiceBusConnection"]) as client,
        client.get_queue_sender(billing) as sender,
    ):
        sender.send_messages(unreadable)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{host.base_url}/api/ops?code={host.master_key}")
    dead = page.locator('#monitoring tr[data-monitor-endpoint="billing"] td[data-metric="deadLettered"]')
    expect(dead).not_to_have_text("0", timeout=SEEN)
    group = page.locator("#groups tbody tr", has_text="billing")
    expect(group).not_to_have_count(0, timeout=SEEN)
    group.first.get_by_role("button", name="Open").click()
    page.locator("#messages tbody tr").first.get_by_role("button", name="View").click()
    trace = page.locator("#message-trace")
    expect(trace).to_contain_text(TRACE_ID)
    expect(trace).to_contain_text("traceparent")
    page.close()
