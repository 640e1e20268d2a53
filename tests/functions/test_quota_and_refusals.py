"""409 when a plan would exceed a quota, 502 when the management plane refuses: nothing half-done, and the
caller gets the reason. In its own module (own emulator): a topic holding 2,000 subscriptions would slow
down every other test that lists the namespace."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from azure.core.exceptions import ResourceNotFoundError
from busbar_app import management_for

from emulator.config import SubscriptionProperties, TopicProperties
from emulator.limits import SUBSCRIPTIONS_PER_TOPIC
from emulator.server import EmulatorThread
from shared import provisioning_service
from shared.api import ApiRequest, guarded
from shared.sample_endpoints import sample_catalog
from shared.sample_events import sample_registry


def test_a_plan_that_would_exceed_a_quota_is_409_and_creates_nothing(
    http: httpx.Client, settings: dict[str, str], private_emulator: EmulatorThread
) -> None:
    emulator = private_emulator.emulator
    assert emulator is not None
    topic = f"full-{uuid.uuid4().hex[:8]}"

    def fill() -> None:
        emulator.namespace.create_topic(topic, TopicProperties())
        for index in range(SUBSCRIPTIONS_PER_TOPIC):
            emulator.namespace.create_subscription(topic, f"s{index}", SubscriptionProperties())

    private_emulator.call(fill)
    events = [{"type": "Shipping.OrderAccepted", "topic": topic}]

    response = http.put("/api/endpoints/billing/subscriptions", json={"events": events})

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "QuotaExceeded"
    assert topic in error["details"][0] and str(SUBSCRIPTIONS_PER_TOPIC) in error["details"][0]
    with management_for(settings) as management, pytest.raises(ResourceNotFoundError):
        management.subscriptions.get(*management.scope, topic, settings["BUSBAR_BILLING_QUEUE"])


def test_a_management_refusal_is_502_with_the_management_error(settings: dict[str, str]) -> None:
    refused = {**settings, "BUSBAR_MANAGEMENT_TOKEN": "not-the-token"}
    service = provisioning_service.from_settings(refused, sample_catalog(), sample_registry())
    request = ApiRequest(
        "PUT", {"endpoint": "crm"}, body=json.dumps({"events": ["Tenant.CustomerCreated"]}).encode()
    )

    response = guarded(lambda: service.put_subscriptions(request))

    assert response.status == 502
    error = response.body["error"]
    assert error["code"] == "ManagementRefused"
    assert error["managementStatus"] == 401
    assert error["details"] and error["details"][0]


def test_missing_management_settings_are_reported_without_a_stack_trace(settings: dict[str, str]) -> None:
    incomplete = {k: v for k, v in settings.items() if k != "BUSBAR_NAMESPACE"}

    response = guarded(
        lambda: provisioning_service.from_settings(incomplete, sample_catalog(), sample_registry()).topology(
            ApiRequest("GET")
        )
    )

    assert response.status == 500
    assert response.body["error"]["code"] == "Misconfigured"
    assert "BUSBAR_NAMESPACE" in response.body["error"]["details"][0]
