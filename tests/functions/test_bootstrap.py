"""``make run``'s startup provisioning: the sample endpoints and the fallback router, idempotently, and the
whole sample chain running on top of it (OrderAccepted -> billing -> InvoiceIssued -> shipping)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from azure.mgmt.servicebus.models import SBTopic, SBTopicProperties

from app.bootstrap import provision
from devhost.testing import running_host
from emulator.server import EmulatorThread
from shared.settings_check import InvalidAppSettings
from shared.topology.errors import QueueNeedsRecreatingError
from tests.functions.busbar_app import APP, HOST_JSON, app_settings, management_for
from tests.functions.handled_record import HandledRecord


def test_provisioning_twice_creates_the_sample_topology_once(private_emulator: EmulatorThread) -> None:
    settings = app_settings(private_emulator)

    provision(settings)
    provision(settings)

    topic = settings["BUSBAR_FALLBACK_TOPIC"]
    with management_for(settings) as management:
        scope = management.scope
        subscriptions = {s.name: s for s in management.subscriptions.list_by_topic(*scope, topic)}
        rules = {
            name: sorted(r.name.lower() for r in management.rules.list_by_subscriptions(*scope, topic, name))
            for name in subscriptions
        }
    billing, crm, shipping, sales = (
        settings[f"BUSBAR_{n}_QUEUE"] for n in ("BILLING", "CRM", "SHIPPING", "SALES")
    )
    assert rules == {
        "busbar-router": ["$default"],
        billing: ["$default", "shipping.orderaccepted", "shipping.orderacceptedv2"],
        crm: ["$default", "shipping.iorderstatuschanged", "tenant.icustomerlifecycleevent"],
        shipping: ["$default", "billing.invoiceissued"],
        sales: ["$default", "shipping.orderaccepted"],
    }
    # sales routes by content: its event rule holds the condition beside the event's stamp.
    with management_for(settings) as management:
        [sales_rule] = [
            r
            for r in management.rules.list_by_subscriptions(*management.scope, topic, sales)
            if r.name.lower() == "shipping.orderaccepted"
        ]
    assert sales_rule.sql_filter.sql_expression == "[Shipping.OrderAccepted] = TRUE AND (amount >= 1000)"
    assert subscriptions["busbar-router"].forward_to in (None, "")
    assert subscriptions[crm].forward_to == crm


def test_start_up_provisions_every_queue_and_topic_with_duplicate_detection_over_the_setting(
    private_emulator: EmulatorThread,
) -> None:
    settings = app_settings(private_emulator, BUSBAR_DUPLICATE_DETECTION_WINDOW="PT45S")

    provision(settings)

    queues = [settings[f"BUSBAR_{n}_QUEUE"] for n in ("BILLING", "CRM", "SHIPPING")]
    with management_for(settings) as management:
        scope = management.scope
        entities = [
            management.queues.get(*scope, q) for q in [*queues, f"{settings['BUSBAR_CRM_QUEUE']}.held"]
        ]
        entities.append(management.topics.get(*scope, settings["BUSBAR_FALLBACK_TOPIC"]))
    for entity in entities:
        assert entity.requires_duplicate_detection is True, entity.name
        assert entity.duplicate_detection_history_time_window == timedelta(seconds=45), entity.name


def test_start_up_stops_on_a_fallback_topic_created_without_duplicate_detection_naming_it(
    private_emulator: EmulatorThread,
) -> None:
    settings = app_settings(private_emulator)
    topic = settings["BUSBAR_FALLBACK_TOPIC"]
    with management_for(settings) as management:
        management.topics.create_or_update(*management.scope, topic, SBTopic(properties=SBTopicProperties()))

    with pytest.raises(QueueNeedsRecreatingError) as refused:
        provision(settings)

    assert f"topic {topic} exists, but RequiresDuplicateDetection is off" in str(refused.value)
    with management_for(settings) as management:
        subscriptions = list(management.subscriptions.list_by_topic(*management.scope, topic))
    assert subscriptions == []  # nothing was added to it


def test_a_bad_duplicate_detection_window_stops_the_start_up_naming_the_setting(
    private_emulator: EmulatorThread,
) -> None:
    settings = app_settings(private_emulator, BUSBAR_DUPLICATE_DETECTION_WINDOW="10 minutes")

    with pytest.raises(InvalidAppSettings) as refused:
        provision(settings)

    assert "BUSBAR_DUPLICATE_DETECTION_WINDOW must be an ISO 8601 duration" in str(refused.value)


def test_the_sample_chain_runs_on_the_started_app(private_emulator: EmulatorThread, tmp_path: Path) -> None:
    record = HandledRecord(tmp_path / "probe.jsonl")
    settings = app_settings(private_emulator, **record.settings)
    order = f"chain-{uuid.uuid4().hex[:8]}"

    with running_host(APP, settings=settings, host_json=HOST_JSON, startup_hook=provision) as host:
        response = httpx.post(
            f"{host.base_url}/api/events/Shipping.OrderAccepted",
            headers={"x-functions-key": host.function_key("publish_event")},
            json={"order_id": order, "amount": 42},
        )
        deadline = time.monotonic() + 30
        while len(record.entries(order)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)

    assert response.status_code == 202, response.text
    assert sorted((e.endpoint, e.contract) for e in record.entries(order)) == [
        ("billing", "Shipping.OrderAccepted"),
        ("crm", "Shipping.OrderAccepted"),
        ("shipping", "Billing.InvoiceIssued"),
    ]


def test_under_a_hierarchy_namespace_the_chain_runs_end_to_end_on_prefixed_entities_only(
    private_emulator: EmulatorThread, tmp_path: Path
) -> None:
    namespace = f"team-{uuid.uuid4().hex[:6]}"
    record = HandledRecord(tmp_path / "probe.jsonl")
    settings = app_settings(private_emulator, BUSBAR_HIERARCHY_NAMESPACE=namespace, **record.settings)
    order = f"tree-{uuid.uuid4().hex[:8]}"
    topic = f"{namespace}/{settings['BUSBAR_FALLBACK_TOPIC']}"
    router = settings["BUSBAR_ROUTER_SUBSCRIPTION"]

    with running_host(APP, settings=settings, host_json=HOST_JSON, startup_hook=provision) as host:
        response = httpx.post(
            f"{host.base_url}/api/events/Shipping.OrderAccepted",
            headers={"x-functions-key": host.function_key("publish_event")},
            json={"order_id": order, "amount": 42},
        )
        with management_for(settings) as management:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                router_backlog = management.subscriptions.get(*management.scope, topic, router).message_count
                if len(record.entries(order)) >= 3 and router_backlog == 0:
                    break
                time.sleep(0.05)
            queues = {q.name for q in management.queues.list_by_namespace(*management.scope)}
            topics = {t.name for t in management.topics.list_by_namespace(*management.scope)}

    assert response.status_code == 202, response.text
    assert response.json()["topic"] == topic
    assert sorted((e.endpoint, e.contract) for e in record.entries(order)) == [
        ("billing", "Shipping.OrderAccepted"),
        ("crm", "Shipping.OrderAccepted"),
        ("shipping", "Billing.InvoiceIssued"),
    ]
    # The router trigger drains its subscription on the prefixed fallback topic.
    assert router_backlog == 0
    for setting in ("BUSBAR_BILLING_QUEUE", "BUSBAR_CRM_QUEUE", "BUSBAR_SHIPPING_QUEUE"):
        assert f"{namespace}/{settings[setting]}" in queues
        assert settings[setting] not in queues
    assert settings["BUSBAR_FALLBACK_TOPIC"] not in topics
