"""OpenTelemetry end to end: the app under devhost and the emulator, exporting over OTLP/HTTP to a real
receiver on 127.0.0.1 named by the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` app setting (as
local.settings.json's Values give it under ``make run``).

One event published with a caller's ``traceparent`` is one trace: the publish span, billing's processing,
billing's publish of ``InvoiceIssued`` and shipping's processing all carry the caller's trace id. A dead-
lettering records its reason on the span; a re-driven copy starts a trace linked to the original one.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBTopic, SBTopicProperties
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from app.endpoints.sample.events import OrderAccepted
from devhost.testing import HostHandle, running_host
from emulator.server import EmulatorThread
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.handlers.dispatch import PERMANENT_HANDLER_ERROR
from shared.management import ManagementClient, ManagementSettings
from shared.topology.messages import build_message
from shared.topology.options import TopicRoutingMode
from tests.functions.busbar_app import APP, HOST_JSON, app_settings, create_queues_and_router
from tests.otlp_collector import Collector, ReceivedSpan, new_traceparent, running_collector

pytestmark = pytest.mark.timeout(180)

# Azure's shortest duplicate detection window: the re-drive waits it out before re-sending a message id.
WINDOW = "PT20S"


@dataclass
class TracedApp:
    settings: dict[str, str]
    host: HostHandle
    collector: Collector
    http: httpx.Client


@pytest.fixture(scope="module")
def traced(private_emulator: EmulatorThread) -> Iterator[TracedApp]:
    with running_collector() as collector:
        settings = app_settings(
            private_emulator,
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
            OTEL_SERVICE_NAME="busbar-telemetry-test",
            # Export quickly (defaults: spans every 5 s, metrics every 60 s).
            OTEL_BSP_SCHEDULE_DELAY="100",
            OTEL_METRIC_EXPORT_INTERVAL="500",
            # The router reads the namespace for every event (as in test_end_to_end): the bridge test
            # creates its dedicated topic just before it sends, which a cached snapshot would not show.
            BUSBAR_ROUTER_SNAPSHOT_SECONDS="0",
            BUSBAR_DUPLICATE_DETECTION_WINDOW=WINDOW,
            BUSBAR_REDRIVE_POLICY=json.dumps({"reasons": {PERMANENT_HANDLER_ERROR: "redrive"}}),
        )
        settings["BUSBAR_REDRIVE_ENTITIES"] = settings["BUSBAR_BILLING_QUEUE"]
        with running_host(
            APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
        ) as host:
            http = httpx.Client(
                base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60
            )
            for endpoint, events in (
                ("billing", ["Shipping.OrderAccepted"]),
                ("shipping", ["Billing.InvoiceIssued"]),
            ):
                response = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})
                assert response.status_code == 201, response.text
            yield TracedApp(settings, host, collector, http)
            http.close()


def process_span(app: TracedApp, trace_id: str, endpoint: str) -> ReceivedSpan | None:
    return app.collector.process_span(trace_id, endpoint)


def publish(app: TracedApp, header: str, amount: float) -> str:
    order = f"order-{uuid.uuid4().hex[:10]}"
    response = app.http.post(
        "/api/events/Shipping.OrderAccepted",
        json={"order_id": order, "amount": amount},
        headers={"traceparent": header},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["messageId"])


def test_an_event_published_with_a_traceparent_is_processed_by_billing_and_shipping_in_that_trace(
    traced: TracedApp,
) -> None:
    header, trace_id, caller_span = new_traceparent()
    message_id = publish(traced, header, 12.5)

    billing = traced.collector.wait_for(lambda: process_span(traced, trace_id, "billing"), "billing's span")
    shipping = traced.collector.wait_for(
        lambda: process_span(traced, trace_id, "shipping"), "shipping's span"
    )

    for span, queue, contract in (
        (billing, traced.settings["BUSBAR_BILLING_QUEUE"], "Shipping.OrderAccepted"),
        (shipping, traced.settings["BUSBAR_SHIPPING_QUEUE"], "Billing.InvoiceIssued"),
    ):
        assert span.name == f"process {queue}"
        assert span.attributes["messaging.system"] == "servicebus"
        assert span.attributes["messaging.destination.name"] == queue
        assert span.attributes["messaging.operation.name"] == "process"
        assert span.attributes["busbar.contract"] == contract
        assert span.attributes["busbar.outcome"] == "handled"
        assert span.attributes["messaging.servicebus.disposition_status"] == "complete"
        assert span.attributes["messaging.servicebus.message.delivery_count"] >= 1
        assert span.attributes["messaging.servicebus.message.enqueued_time"] > 0
        assert span.service_name == "busbar-telemetry-test"
    assert billing.attributes["messaging.message.id"] == message_id

    # publish (the caller's child) → billing → billing's publish of InvoiceIssued → shipping.
    by_id = {s.span_id: s for s in traced.collector.spans() if s.trace_id == trace_id}
    published = by_id[billing.parent_span_id]
    assert published.name.startswith("publish ") and published.parent_span_id == caller_span
    assert published.attributes["messaging.operation.type"] == "send"
    invoice = by_id[shipping.parent_span_id]
    assert invoice.attributes["busbar.contract"] == "Billing.InvoiceIssued"
    assert invoice.parent_span_id == billing.span_id


def test_the_processing_duration_histogram_is_exported_per_endpoint_contract_and_outcome(
    traced: TracedApp,
) -> None:
    header, trace_id, _ = new_traceparent()
    publish(traced, header, 3)
    traced.collector.wait_for(lambda: process_span(traced, trace_id, "shipping"), "shipping's span")

    def billing_handled() -> list[dict[str, object]]:
        return [
            attributes
            for metric in traced.collector.metrics()
            if metric.name == "messaging.process.duration"
            and metric.kind == "histogram"
            and metric.unit == "s"
            for attributes, count in metric.points
            if count > 0
            and attributes.get("busbar.endpoint") == "billing"
            and attributes.get("busbar.outcome") == "handled"
        ]

    (attributes, *_) = traced.collector.wait_for(billing_handled, "the processing duration histogram")
    assert attributes["busbar.contract"] == "Shipping.OrderAccepted"
    names = {m.name for m in traced.collector.metrics()}
    assert {
        "nservicebus.messaging.successes",
        "nservicebus.messaging.critical_time",
        "messaging.client.consumed.messages",
        "messaging.client.sent.messages",
    } <= names


def test_a_dead_lettering_records_its_reason_and_the_redriven_copy_links_to_the_original_trace(
    traced: TracedApp,
) -> None:
    header, trace_id, _ = new_traceparent()
    publish(traced, header, -1)  # billing can never invoice a negative amount: dead-lettered at once

    def dead_lettered() -> ReceivedSpan | None:
        span = process_span(traced, trace_id, "billing")
        return span if span is not None and span.attributes.get("busbar.outcome") == "dead_lettered" else None

    billing = traced.collector.wait_for(dead_lettered, "billing's dead-lettering span")
    assert billing.attributes["messaging.servicebus.disposition_status"] == "dead_letter"
    assert billing.attributes["busbar.dead_letter.reason"] == PERMANENT_HANDLER_ERROR
    ((_, attributes),) = [(n, a) for n, a in billing.events if n == "dead_lettered"]
    assert attributes["busbar.dead_letter.reason"] == PERMANENT_HANDLER_ERROR
    assert attributes["busbar.dead_letter.description"]  # the handler's message

    def redrive() -> ReceivedSpan | None:
        return next(
            (
                s
                for s in traced.collector.spans()
                if s.name.startswith("redrive ") and trace_id in dict(s.links)
            ),
            None,
        )

    # The re-drive holds the copy until billing's duplicate detection window has passed: run it until it
    # re-sends (the timer's schedule never fires in these tests; the admin endpoint runs it now).
    deadline = time.monotonic() + 120
    span = None
    while span is None:
        assert time.monotonic() < deadline, "the re-drive never re-sent the dead letter"
        response = httpx.post(
            f"{traced.host.base_url}/admin/functions/redrive_dead_letters",
            json={"input": ""},
            headers={"x-functions-key": traced.host.master_key},
            timeout=30,
        )
        assert response.status_code == 202, response.text
        try:
            span = traced.collector.wait_for(redrive, "a re-drive span", timeout=3)
        except AssertionError:
            continue
    assert span.trace_id != trace_id  # a new trace, linked to the original
    assert span.attributes["messaging.destination.name"] == traced.settings["BUSBAR_BILLING_QUEUE"]
    assert span.attributes["busbar.redrive.reason"] == PERMANENT_HANDLER_ERROR

    # The copy is processed in the re-drive's trace, as the re-drive span's child.
    copy = traced.collector.wait_for(
        lambda: process_span(traced, span.trace_id, "billing"), "the copy's span"
    )
    assert copy.parent_span_id == span.span_id


def test_a_message_carrying_only_diagnostic_id_as_the_dotnet_sdk_writes_it_joins_that_trace(
    traced: TracedApp,
) -> None:
    # A .NET sender (Azure.Messaging.ServiceBus, NServiceBus) puts its W3C context in Diagnostic-Id; the
    # Python SDK reads traceparent first, then Diagnostic-Id (azure/servicebus/_common/tracing.py).
    header, trace_id, sender_span = new_traceparent()
    message = build_message(
        OrderAccepted(order_id=f"order-{uuid.uuid4().hex[:10]}", amount=4),
        TopicRoutingMode.NotMultiplexed,
        endpoint_name="dotnet-sender",
    )
    message.application_properties = {**(message.application_properties or {}), "Diagnostic-Id": header}
    with (
        ServiceBusClient.from_connection_string(traced.settings["ServiceBusConnection"]) as client,
        client.get_queue_sender(traced.settings["BUSBAR_BILLING_QUEUE"]) as sender,
    ):
        sender.send_messages(message)

    billing = traced.collector.wait_for(lambda: process_span(traced, trace_id, "billing"), "billing's span")
    assert billing.parent_span_id == sender_span
    assert billing.attributes["busbar.outcome"] == "handled"


def test_the_routers_bridged_copy_starts_a_trace_linked_to_the_original(traced: TracedApp) -> None:
    # An event on the fallback topic that a dedicated topic's subscriber did not get there: the router
    # bridges a copy (as in test_end_to_end), which carries a new trace linked to the event's.
    dedicated, watcher = "Tenant.CustomerUpdated", f"watch-{uuid.uuid4().hex[:8]}"
    with ManagementClient(ManagementSettings.from_env(traced.settings)) as management:
        group, namespace = management.scope
        deduplicated = SBTopicProperties(
            requires_duplicate_detection=True, duplicate_detection_history_time_window=timedelta(minutes=10)
        )
        management.topics.create_or_update(group, namespace, dedicated, SBTopic(properties=deduplicated))
        management.subscriptions.create_or_update(group, namespace, dedicated, watcher, SBSubscription())
    header, trace_id, publisher_span = new_traceparent()
    message = ServiceBusMessage(
        json.dumps({"customer_id": f"c-{uuid.uuid4().hex[:8]}", "name": "Ada"}),
        message_id=f"msg-{uuid.uuid4().hex[:10]}",
        content_type="application/json",
        session_id="session-1",
        application_properties={
            ENCLOSED_MESSAGE_TYPES: "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent",
            "Tenant.CustomerUpdated": True,
            "Tenant.ICustomerLifecycleEvent": True,
            "traceparent": header,
        },
    )
    with ServiceBusClient.from_connection_string(traced.settings["ServiceBusConnection"]) as client:
        with client.get_topic_sender(traced.settings["BUSBAR_FALLBACK_TOPIC"]) as sender:
            sender.send_messages(message)
        with client.get_subscription_receiver(dedicated, watcher, max_wait_time=30) as receiver:
            [copy] = receiver.receive_messages(max_message_count=1, max_wait_time=30)
            receiver.complete_message(copy)

    assert copy.message_id == message.message_id
    stamped = (copy.application_properties or {})[b"traceparent"]
    assert isinstance(stamped, bytes)  # a received message's string values arrive as bytes
    _, copy_trace, copy_parent, _ = stamped.decode().split("-")
    assert copy_trace != trace_id

    def bridge() -> ReceivedSpan | None:
        return next((s for s in traced.collector.spans() if s.span_id == copy_parent), None)

    span = traced.collector.wait_for(bridge, "the bridge span")
    assert span.name == f"bridge {dedicated}"
    assert span.links == [(trace_id, publisher_span)]
    assert span.attributes["messaging.destination.name"] == dedicated
    assert span.attributes["busbar.contract"] == "Tenant.CustomerUpdated"
