"""OpenTelemetry through ``make run`` (issue 40's first acceptance point): with an OTLP/HTTP receiver on
127.0.0.1 named by the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` in ``local.settings.json``, as
docs/observability.md tells a user to set it, the app ``make run`` serves exports

* one trace per event: ``Shipping.OrderAccepted`` published over HTTP with a caller's ``traceparent`` is
  processed by billing and then shipping in that trace, each ``process`` span with
  ``messaging.system = "servicebus"`` and its queue as ``messaging.destination.name``;
* a re-drive linked to the original trace: an order billing dead-letters (a negative amount,
  ``PermanentHandlerError``), retried by the operator through the console's API as docs/operations.md
  shows, is re-sent in a new trace whose ``redrive`` span links to the order's trace, and the copy's
  ``process`` span is that span's child;
* the ``messaging.process.duration`` histogram, per endpoint, contract and outcome.

tests/functions/test_telemetry.py proves the same spans with devhost started by the test; this one proves a
user's path: ``make run``, its own settings file, its own provisioning, its printed keys.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.handlers.dispatch import PERMANENT_HANDLER_ERROR
from tests.devhost.test_make_run import REPO, MakeRun
from tests.otlp_collector import Collector, ReceivedSpan, new_traceparent, running_collector

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

READY_SECONDS = 240.0  # start-up under a loaded machine (emulator, Azurite, provisioning, worker)
WAIT = 120.0
SERVICE_NAME = "busbar-make-run"


def settings_with_the_collector(collector: Collector) -> dict[str, Any]:
    """local.settings.sample.json with the receiver named as docs/observability.md shows."""
    document: dict[str, Any] = json.loads((REPO / "local.settings.sample.json").read_text())
    document["Values"].update(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_SERVICE_NAME=SERVICE_NAME,
        # Export quickly (the SDK's defaults: spans every 5 s, metrics every 60 s).
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_METRIC_EXPORT_INTERVAL="500",
        # Azure's shortest duplicate detection window: the operator's retry holds a copy of a message id
        # billing saw within the window, so a short one lets the retry re-send within the test.
        BUSBAR_DUPLICATE_DETECTION_WINDOW="PT20S",
        # The timer's default policy archives a PermanentHandlerError; run it once a year, so the
        # dead letter is still there for the operator's retry (the re-drive under test).
        BUSBAR_REDRIVE_SCHEDULE="0 0 0 1 1 *",
    )
    return document


def publish(http: httpx.Client, header: str, amount: float) -> str:
    """``Shipping.OrderAccepted`` over the app's HTTP API with a caller's ``traceparent``: its messageId."""
    response = http.post(
        "/api/events/Shipping.OrderAccepted",
        json={"order_id": f"order-{uuid.uuid4().hex[:10]}", "amount": amount},
        headers={"traceparent": header},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["messageId"])


def endpoint_queues(admin: httpx.Client) -> dict[str, str]:
    """Each hosted endpoint's input queue, as the console's API names it."""
    response = admin.get("/api/ops/entities")
    assert response.status_code == 200, response.text
    return {e["endpoint"]: e["queue"] for e in response.json()["endpoints"]}


def dead_letter_of(admin: httpx.Client, queue: str, message_id: str) -> dict[str, Any] | None:
    """The console's view of ``message_id`` in ``queue``'s dead letters, once it is there."""
    response = admin.get("/api/ops/failures")
    assert response.status_code == 200, response.text
    for group in response.json()["groups"]:
        for listed in group["messages"]:
            if listed["entity"] != queue:
                continue
            view = admin.get(f"/api/ops/failures/{queue}/{listed['sequenceNumber']}")
            if view.status_code == 200 and view.json()["system"]["messageId"] == message_id:
                found: dict[str, Any] = view.json()
                return found
    return None


def retry_until_sent(admin: httpx.Client, queue: str, sequence_number: int) -> dict[str, Any]:
    """The console's retry of one dead letter, repeated while it is held for billing's duplicate-detection
    window (docs/operations.md: the guards still apply); the summary of the run that re-sent it."""
    deadline = time.monotonic() + WAIT
    while True:
        response = admin.post(
            "/api/ops/failures/retry", json={"entity": queue, "sequenceNumbers": [sequence_number]}
        )
        assert response.status_code == 200, response.text
        summary: dict[str, Any] = response.json()["summary"]
        if summary["totals"]["redriven"] == 1:
            return summary
        assert summary["totals"]["held"] == 1, summary  # nothing else may happen to it
        assert time.monotonic() < deadline, f"the retry never re-sent the dead letter: {summary}"
        time.sleep(1)


def assert_processed(span: ReceivedSpan, queue: str, contract: str, outcome: str) -> None:
    assert span.name == f"process {queue}"
    assert span.attributes["messaging.system"] == "servicebus"
    assert span.attributes["messaging.destination.name"] == queue
    assert span.attributes["messaging.operation.name"] == "process"
    assert span.attributes["busbar.contract"] == contract
    assert span.attributes["busbar.outcome"] == outcome
    assert span.service_name == SERVICE_NAME


def durations(collector: Collector, endpoint: str, outcome: str) -> list[dict[str, Any]]:
    """The attributes of the exported ``messaging.process.duration`` points of ``endpoint`` and
    ``outcome`` that counted at least one delivery."""
    return [
        attributes
        for metric in collector.metrics()
        if metric.name == "messaging.process.duration" and metric.kind == "histogram" and metric.unit == "s"
        for attributes, count in metric.points
        if count > 0
        and attributes.get("busbar.endpoint") == endpoint
        and attributes.get("busbar.outcome") == outcome
    ]


def wait_for_durations(collector: Collector, endpoint: str, outcome: str) -> list[dict[str, Any]]:
    return collector.wait_for(
        lambda: durations(collector, endpoint, outcome), f"{endpoint}'s {outcome} processing durations", WAIT
    )


@pytest.mark.timeout(900)
def test_make_run_exports_each_events_trace_a_redrive_linked_to_it_and_the_processing_histogram_over_otlp(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    with running_collector() as collector:
        document = settings_with_the_collector(collector)
        (tmp_path / "local.settings.json").write_text(json.dumps(document, indent=2))  # where MakeRun looks
        run = MakeRun(tmp_path / "data")
        try:
            run.reader.wait_ready(timeout=READY_SECONDS)
            http = httpx.Client(
                base_url=run.base_url, headers={"x-functions-key": run.banner("Host key")}, timeout=60
            )
            admin = httpx.Client(
                base_url=run.base_url, headers={"x-functions-key": run.banner("Master key")}, timeout=60
            )
            with http, admin:
                queues = endpoint_queues(admin)
                billing_queue, shipping_queue = queues["billing"], queues["shipping"]

                # One trace per event: publish (the caller's child) → billing → InvoiceIssued → shipping.
                header, trace_id, caller_span = new_traceparent()
                message_id = publish(http, header, 12.5)
                billing = collector.wait_for(
                    lambda: collector.process_span(trace_id, "billing"), "billing's span", WAIT
                )
                shipping = collector.wait_for(
                    lambda: collector.process_span(trace_id, "shipping"), "shipping's span", WAIT
                )
                assert_processed(billing, billing_queue, "Shipping.OrderAccepted", "handled")
                assert_processed(shipping, shipping_queue, "Billing.InvoiceIssued", "handled")
                assert billing.attributes["messaging.message.id"] == message_id
                in_trace = {s.span_id: s for s in collector.spans() if s.trace_id == trace_id}
                assert in_trace[billing.parent_span_id].parent_span_id == caller_span
                assert in_trace[shipping.parent_span_id].parent_span_id == billing.span_id

                # A dead-lettered order, retried by the operator: a new trace linked to the order's.
                header, failed_trace, _ = new_traceparent()
                failed_id = publish(http, header, -1)  # billing never invoices a negative amount

                def dead_lettered() -> ReceivedSpan | None:
                    span = collector.process_span(failed_trace, "billing")
                    outcome = None if span is None else span.attributes.get("busbar.outcome")
                    return span if outcome == "dead_lettered" else None

                failed = collector.wait_for(dead_lettered, "billing's dead-lettering span", WAIT)
                assert failed.attributes["busbar.dead_letter.reason"] == PERMANENT_HANDLER_ERROR
                dead_letter = collector.wait_for(
                    lambda: dead_letter_of(admin, billing_queue, failed_id), "the console's dead letter", WAIT
                )
                assert dead_letter["trace"]["traceId"] == failed_trace
                retry_until_sent(admin, billing_queue, dead_letter["sequenceNumber"])

                # The message carried its publish span's context: the re-drive links to exactly that.
                original = (failed_trace, failed.parent_span_id)

                def redrive() -> ReceivedSpan | None:
                    spans = collector.spans()
                    return next(
                        (s for s in spans if s.name.startswith("redrive ") and original in s.links), None
                    )

                redriven = collector.wait_for(redrive, "the re-drive span linked to the order's trace", WAIT)
                assert redriven.trace_id != failed_trace
                assert redriven.attributes["messaging.system"] == "servicebus"
                assert redriven.attributes["messaging.destination.name"] == billing_queue
                assert redriven.attributes["busbar.redrive.reason"] == PERMANENT_HANDLER_ERROR
                copy = collector.wait_for(
                    lambda: collector.process_span(redriven.trace_id, "billing"), "the copy's span", WAIT
                )
                assert copy.parent_span_id == redriven.span_id
                assert copy.attributes["messaging.message.id"] == failed_id
                assert_processed(copy, billing_queue, "Shipping.OrderAccepted", "dead_lettered")

                # The processing-duration histogram, per endpoint, contract and outcome.
                for endpoint, outcome, contract in (
                    ("billing", "handled", "Shipping.OrderAccepted"),
                    ("billing", "dead_lettered", "Shipping.OrderAccepted"),
                    ("shipping", "handled", "Billing.InvoiceIssued"),
                ):
                    points = wait_for_durations(collector, endpoint, outcome)
                    assert contract in {p["busbar.contract"] for p in points}, points
            run.interrupt()
        finally:
            run.kill()
