"""409 when a plan would exceed a quota, 502 when the management plane refuses: nothing half-done, and the
caller gets the reason. In its own module (own emulator): a topic holding 2,000 subscriptions would slow
down every other test that lists the namespace."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from azure.core.exceptions import ResourceNotFoundError

from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import sample_registry
from app.services import provisioning_from_settings
from emulator.broker.properties import SubscriptionProperties, TopicProperties
from emulator.limits import SQL_FILTERS_PER_TOPIC, SUBSCRIPTIONS_PER_TOPIC
from emulator.server import EmulatorThread
from shared.api import ApiRequest, guarded
from shared.api.provisioning.service import management_error
from shared.topology import Provisioner, ProvisioningError, TopologyOptions, desired_state
from tests.functions.busbar_app import management_for


def test_a_plan_that_would_exceed_a_quota_is_409_and_creates_nothing(
    http: httpx.Client, settings: dict[str, str], private_emulator: EmulatorThread
) -> None:
    emulator = private_emulator.emulator
    assert emulator is not None
    topic = f"full-{uuid.uuid4().hex[:8]}"

    def fill() -> None:
        emulator.namespace.create_topic(topic, TopicProperties(requires_duplicate_detection=True))
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
    service = provisioning_from_settings(refused, sample_catalog(), sample_registry())
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
        lambda: provisioning_from_settings(incomplete, sample_catalog(), sample_registry()).topology(
            ApiRequest("GET")
        )
    )

    assert response.status == 500
    assert response.body["error"]["code"] == "Misconfigured"
    assert "BUSBAR_NAMESPACE" in response.body["error"]["details"][0]


def _fill_with_default_subscriptions(thread: EmulatorThread, topic: str, count: int) -> None:
    """``count`` subscriptions on a new ``topic``, each with its $Default 1=1 (a SQL filter each)."""
    emulator = thread.emulator
    assert emulator is not None

    def fill() -> None:
        emulator.namespace.create_topic(topic, TopicProperties(requires_duplicate_detection=True))
        for index in range(count):
            emulator.namespace.create_subscription(topic, f"s{index}", SubscriptionProperties())

    thread.call(fill)


def test_sql_filters_already_on_a_shared_topic_are_counted_so_the_put_is_409_and_creates_nothing(
    http: httpx.Client, settings: dict[str, str], private_emulator: EmulatorThread
) -> None:
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    _fill_with_default_subscriptions(private_emulator, topic, SQL_FILTERS_PER_TOPIC - 1)
    events = [{"type": "Shipping.OrderAccepted", "topic": topic, "routingMode": "SqlLikeFilter"}]

    response = http.put("/api/endpoints/billing/subscriptions", json={"events": events})

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "QuotaExceeded"
    detail = next(d for d in error["details"] if "SQL filter" in d)
    # $default 1=0 and the event's SQL rule are planned; the 1,999 $Default rules already exist.
    assert f"{SQL_FILTERS_PER_TOPIC + 1} SQL filter" in detail
    assert f"(2 planned + {SQL_FILTERS_PER_TOPIC - 1} existing)" in detail
    with management_for(settings) as management, pytest.raises(ResourceNotFoundError):
        management.subscriptions.get(*management.scope, topic, settings["BUSBAR_BILLING_QUEUE"])


def test_a_rule_refused_for_quota_mid_apply_rolls_the_new_subscription_back_and_answers_409(
    settings: dict[str, str], private_emulator: EmulatorThread
) -> None:
    topic = f"raced-{uuid.uuid4().hex[:8]}"
    queue = f"raced-q-{uuid.uuid4().hex[:6]}"
    options = TopologyOptions()
    desired = desired_state(
        options, queue, [{"type": "Shipping.OrderAccepted", "topic": topic, "routingMode": "SqlLikeFilter"}]
    )
    with management_for(settings) as management:
        provisioner = Provisioner(management)
        plan = provisioner.plan(desired)  # the topic does not exist yet: nothing to count
        # Another writer fills the topic between plan and apply: the pre-check could not see it.
        _fill_with_default_subscriptions(private_emulator, topic, SQL_FILTERS_PER_TOPIC - 1)

        with pytest.raises(ProvisioningError) as raised:
            provisioner.apply(plan)

        with pytest.raises(ResourceNotFoundError):
            management.subscriptions.get(*management.scope, topic, queue)
    error = raised.value
    assert error.rolled_back == [f"{topic}/Subscriptions/{queue}"]
    assert not [p for p in error.done if p.startswith(f"{topic}/Subscriptions/")]
    response = management_error(error).response()
    assert response.status == 409
    assert response.body["error"]["code"] == "QuotaExceeded"
    assert response.body["error"]["rolledBack"] == [f"{topic}/Subscriptions/{queue}"]
    assert str(SQL_FILTERS_PER_TOPIC) in response.body["error"]["details"][0]


def test_two_puts_that_each_fit_a_nearly_full_topic_but_not_together_are_serialised_on_the_topic(
    http: httpx.Client, settings: dict[str, str], private_emulator: EmulatorThread
) -> None:
    topic = f"nearly-full-{uuid.uuid4().hex[:8]}"
    # Each request adds 2 SQL filters ($default 1=0 and its LIKE rule): 1,999 alone, 2,001 together.
    _fill_with_default_subscriptions(private_emulator, topic, SQL_FILTERS_PER_TOPIC - 3)
    events = [{"type": "Shipping.OrderAccepted", "topic": topic, "routingMode": "SqlLikeFilter"}]
    start = threading.Barrier(2)

    def put(endpoint: str) -> httpx.Response:
        start.wait()
        return http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})

    with ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(put, ["billing", "shipping"]))

    assert sorted(r.status_code for r in responses) == [201, 409], [r.text for r in responses]
    [refused] = [r.json()["error"] for r in responses if r.status_code == 409]
    # Refused by the plan made under the topic's lock, after the winner's rules were in: nothing to undo.
    assert refused["code"] == "QuotaExceeded" and "rolledBack" not in refused
    assert any(f"(2 planned + {SQL_FILTERS_PER_TOPIC - 1} existing)" in d for d in refused["details"])
    with management_for(settings) as management:
        names = {s.name for s in management.subscriptions.list_by_topic(*management.scope, topic)}
    queues = {settings["BUSBAR_BILLING_QUEUE"], settings["BUSBAR_SHIPPING_QUEUE"]}
    assert len(names & queues) == 1
