"""On-demand provisioning for subscribers the app does not host (issue 17, point 10): another app or a
.NET NServiceBus endpoint owns its input queue and wants events forwarded to it without a redeploy."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties, SBTopic, SBTopicProperties

from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import sample_registry
from app.services import provisioning_from_settings
from shared.api import ApiRequest, guarded
from tests.functions.busbar_app import management_for

# Every queue and topic Busbar provisions on requires duplicate detection (the default window, PT10M).
DUPLICATE_DETECTION: dict[str, Any] = {
    "requires_duplicate_detection": True,
    "duplicate_detection_history_time_window": timedelta(minutes=10),
}


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_an_endpoint_the_app_does_not_host_gets_its_input_queue_and_subscriptions_and_get_and_delete_work(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    endpoint = fresh("warehouse")

    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": ["Shipping.OrderAccepted"]})
    listed = http.get(f"/api/endpoints/{endpoint}/subscriptions")
    deleted = http.delete(f"/api/endpoints/{endpoint}/subscriptions/Shipping.OrderAccepted")
    after = http.get(f"/api/endpoints/{endpoint}/subscriptions")

    assert put.status_code == 201, put.text
    body = put.json()
    assert body["hosted"] is False and body["queue"] == endpoint
    assert f"{endpoint}" in body["result"]["created"]
    [subscription] = listed.json()["subscriptions"]
    assert subscription["forwardTo"] == endpoint
    assert listed.json()["handles"] is None
    assert deleted.status_code == 200, deleted.text
    # On the filtered fallback topic the event's rule goes and the subscription stays with $default 1=0.
    [remaining] = after.json()["subscriptions"]
    assert [r["sqlExpression"] for r in remaining["rules"]] == ["1=0"]
    with management_for(settings) as management:
        queue = management.queues.get(*management.scope, endpoint)
    assert queue.max_delivery_count == 10  # BUSBAR_ENTITY_MAX_DELIVERY_COUNT's default


def test_an_existing_input_queue_is_adopted_as_it_is(http: httpx.Client, settings: dict[str, str]) -> None:
    endpoint = fresh("dotnet-sales")
    with management_for(settings) as management:
        properties = SBQueueProperties(max_delivery_count=3, **DUPLICATE_DETECTION)
        management.queues.create_or_update(*management.scope, endpoint, SBQueue(properties=properties))

    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": ["Tenant.CustomerCreated"]})

    assert put.status_code == 201, put.text
    queue_items = [i for i in put.json()["plan"]["items"] if i["kind"] == "queue"]
    assert [(i["action"], i["path"]) for i in queue_items] == [("unchanged", endpoint)]
    with management_for(settings) as management:
        assert management.queues.get(*management.scope, endpoint).max_delivery_count == 3


def test_an_existing_input_queue_without_duplicate_detection_is_409_needing_a_new_queue(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    # RequiresDuplicateDetection cannot be changed on an existing queue, so it is refused, never adopted.
    endpoint = fresh("dotnet-sales")
    with management_for(settings) as management:
        properties = SBQueueProperties(max_delivery_count=3)
        management.queues.create_or_update(*management.scope, endpoint, SBQueue(properties=properties))

    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": ["Tenant.CustomerCreated"]})

    assert put.status_code == 409, put.text
    error = put.json()["error"]
    assert error["code"] == "QueueNeedsNewName"
    assert f"queue {endpoint} (the endpoint's input queue) exists" in error["details"][0]
    assert "RequiresDuplicateDetection is off" in error["details"][0]
    assert [i["path"] for i in error["plan"]["items"] if i["action"] == "refused"] == [endpoint]
    assert http.get(f"/api/endpoints/{endpoint}/subscriptions").json()["subscriptions"] == []
    with management_for(settings) as management:
        assert management.queues.get(*management.scope, endpoint).requires_duplicate_detection is False


def test_queue_settings_in_the_body_apply_when_the_queue_is_created(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    endpoint = fresh("partner")
    body = {
        "events": ["Tenant.CustomerCreated"],
        "queue": {"lockDurationSeconds": 45, "maxDeliveryCount": 4, "maxSizeInMegabytes": 1024},
    }

    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json=body)

    assert put.status_code == 201, put.text
    [spec] = put.json()["desired"]["subscriptions"]
    with management_for(settings) as management:
        queue = management.queues.get(*management.scope, endpoint)
        subscription = management.subscriptions.get(*management.scope, spec["topic"], endpoint)
    assert (queue.lock_duration, queue.max_delivery_count, queue.max_size_in_megabytes) == (
        timedelta(seconds=45),
        4,
        1024,
    )
    # The override is the queue's: subscriptions keep the app's entity settings.
    assert subscription.max_delivery_count == 10


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("bad*name", "1-260 characters of letters, digits"),
        ("trailing-", "ending with a letter or digit"),
        ("x" * 51, "at most 50 characters"),
    ],
)
def test_an_invalid_endpoint_name_is_400_stating_the_azure_rule(
    http: httpx.Client, name: str, rule: str
) -> None:
    response = http.put(f"/api/endpoints/{name}/subscriptions", json={"events": ["Tenant.CustomerCreated"]})

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "ValidationFailed"
    assert any(rule in d for d in error["details"]), error["details"]


def test_an_unknown_event_type_is_404_unless_the_body_names_its_topic(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    endpoint = fresh("legacy")
    topic = fresh("legacy-events")
    with management_for(settings) as management:
        properties = SBTopicProperties(**DUPLICATE_DETECTION)
        management.topics.create_or_update(*management.scope, topic, SBTopic(properties=properties))

    unknown = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": ["Legacy.Thing"]})
    explicit = http.put(
        f"/api/endpoints/{endpoint}/subscriptions",
        json={"events": [{"type": "Legacy.Thing", "topic": topic}]},
    )

    assert unknown.status_code == 404
    assert explicit.status_code == 201, explicit.text
    with management_for(settings) as management:
        assert management.subscriptions.get(*management.scope, topic, endpoint).forward_to == endpoint


def test_the_provisionable_endpoints_setting_restricts_names_with_403(settings: dict[str, str]) -> None:
    restricted = {**settings, "BUSBAR_PROVISIONABLE_ENDPOINTS": "partner-*, dotnet-sales"}
    service = provisioning_from_settings(restricted, sample_catalog(), sample_registry())
    body = json.dumps({"events": ["Tenant.CustomerCreated"]}).encode()
    outsider = fresh("intruder")

    refused = guarded(lambda: service.put_subscriptions(ApiRequest("PUT", {"endpoint": outsider}, body=body)))
    allowed = guarded(
        lambda: service.put_subscriptions(ApiRequest("PUT", {"endpoint": fresh("Partner")}, body=body))
    )
    hosted = guarded(lambda: service.get_subscriptions(ApiRequest("GET", {"endpoint": "crm"})))

    assert refused.status == 403
    assert refused.body["error"]["code"] == "EndpointNotAllowed"
    assert "partner-*, dotnet-sales" in refused.body["error"]["details"][0]
    assert allowed.status == 201, allowed.body
    assert hosted.status == 200
    with management_for(settings) as management, pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, outsider)


def test_an_event_type_the_registry_does_not_know_is_unsubscribed_by_naming_its_topic(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    endpoint = fresh("legacy")
    topic = fresh("legacy-events")
    with management_for(settings) as management:
        properties = SBTopicProperties(**DUPLICATE_DETECTION)
        management.topics.create_or_update(*management.scope, topic, SBTopic(properties=properties))
    events = [{"type": "Legacy.Thing", "topic": topic}]
    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})

    unknown = http.delete(f"/api/endpoints/{endpoint}/subscriptions/Legacy.Thing")
    named = http.delete(f"/api/endpoints/{endpoint}/subscriptions/Legacy.Thing", params={"topic": topic})

    assert put.status_code == 201, put.text
    assert unknown.status_code == 404
    assert named.status_code == 200, named.text
    assert named.json()["result"]["deleted"] == [f"{topic}/Subscriptions/{endpoint}"]
    with management_for(settings) as management, pytest.raises(ResourceNotFoundError):
        management.subscriptions.get(*management.scope, topic, endpoint)
