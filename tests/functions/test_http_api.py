"""The HTTP API's contract under devhost: status codes and bodies for every error case, dry runs, the
topology view, GET and DELETE of subscriptions, the ordering key a publish puts on the wire, and
idempotent publishing (``Idempotency-Key``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from azure.mgmt.servicebus.models import SBSubscription
from azure.servicebus import ServiceBusReceivedMessage

from devhost.testing import running_host
from emulator.server import EmulatorThread
from shared.topology.messages import MESSAGE_ID
from tests.functions.busbar_app import (
    APP,
    HOST_JSON,
    create_queues_and_router,
    management_for,
    sdk_client_for,
)
from tests.shared.redrive.redrive_support import text_properties


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    error: dict[str, Any] = response.json()["error"]
    assert "Traceback" not in response.text
    return error


def test_requests_without_a_function_key_are_refused_with_401(http: httpx.Client) -> None:
    anonymous = httpx.get(f"{http.base_url}/api/topology")

    assert anonymous.status_code == 401


def test_an_unknown_event_type_is_404(http: httpx.Client) -> None:
    response = http.put(
        "/api/endpoints/billing/subscriptions",
        json={"events": ["Shipping.OrderAccepted", "Sales.OrderPlaced"]},
    )

    assert response.status_code == 404
    assert error_of(response)["details"][0] == "Sales.OrderPlaced is not a known contract"


def test_an_invalid_body_is_400_listing_every_problem(http: httpx.Client) -> None:
    response = http.put(
        "/api/endpoints/billing/subscriptions",
        json={
            "events": [17, {"type": "Shipping.OrderAccepted", "routingMode": "Sometimes"}],
            "dryRun": "maybe",
            "extra": True,
        },
    )

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "ValidationFailed"
    details = "\n".join(error["details"])
    for location in ("events.0", "events.1", "routingMode", "dryRun", "extra"):
        assert location in details, details


def test_a_body_that_is_not_json_is_400(http: httpx.Client) -> None:
    response = http.put("/api/endpoints/billing/subscriptions", content=b"events: [x]")

    assert response.status_code == 400
    assert "Invalid JSON" in "\n".join(error_of(response)["details"])


def test_incompatible_routing_modes_on_one_topic_are_400_with_the_nservicebus_message(
    http: httpx.Client,
) -> None:
    events = [
        {"type": "Shipping.OrderAccepted", "topic": "orders", "routingMode": "SqlLikeFilter"},
        {"type": "Shipping.OrderDeclined", "topic": "orders", "routingMode": "CorrelationFilter"},
    ]
    response = http.put("/api/endpoints/billing/subscriptions", json={"events": events})

    assert response.status_code == 400
    assert (
        "Incompatible subscription routing modes detected for topic 'orders'"
        in error_of(response)["details"][0]
    )


def test_a_dry_run_plans_without_creating_anything(http: httpx.Client, settings: dict[str, str]) -> None:
    dry = http.put(
        "/api/endpoints/crm/subscriptions", json={"events": ["Tenant.CustomerCreated"], "dryRun": True}
    )
    listed = http.get("/api/endpoints/crm/subscriptions")

    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert body["outcome"] == "planned"
    assert body["plan"]["summary"]["create"] >= 3  # queue, subscription, rules
    assert body["result"]["created"] == []
    assert listed.status_code == 200
    assert listed.json()["subscriptions"] == []
    assert listed.json()["queue"] == settings["BUSBAR_CRM_QUEUE"]


def test_get_and_delete_show_and_remove_one_event(http: httpx.Client, settings: dict[str, str]) -> None:
    put = http.put(
        "/api/endpoints/shipping/subscriptions",
        json={"events": ["Billing.InvoiceIssued", "Tenant.CustomerDeleted"]},
    )
    deleted = http.delete("/api/endpoints/shipping/subscriptions/Tenant.CustomerDeleted")
    listed = http.get("/api/endpoints/shipping/subscriptions")

    assert put.status_code == 201, put.text
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["result"]["deleted"] == [
        f"{settings['BUSBAR_FALLBACK_TOPIC']}/Subscriptions/{settings['BUSBAR_SHIPPING_QUEUE']}/Rules/"
        "Tenant.CustomerDeleted"
    ]
    [subscription] = listed.json()["subscriptions"]
    assert subscription["forwardTo"] == settings["BUSBAR_SHIPPING_QUEUE"]
    rules = {r["name"].lower(): r for r in subscription["rules"]}  # rule names are case-insensitive
    assert set(rules) == {"$default", "billing.invoiceissued"}
    assert rules["$default"]["sqlExpression"] == "1=0"


def test_deleting_an_unknown_event_type_is_404(http: httpx.Client) -> None:
    response = http.delete("/api/endpoints/shipping/subscriptions/Nope.Nothing")

    assert response.status_code == 404
    assert error_of(response)["code"] == "NotFound"


def test_the_topology_view_shows_options_and_each_endpoints_desired_state(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    response = http.get("/api/topology")

    assert response.status_code == 200
    body = response.json()
    assert body["fallbackTopic"] == {
        "topicName": settings["BUSBAR_FALLBACK_TOPIC"],
        "routingMode": "CorrelationFilter",
    }
    crm = body["endpoints"]["crm"]
    assert crm["events"] == ["Tenant.ICustomerLifecycleEvent", "Shipping.IOrderStatusChanged"]
    [subscription] = crm["desired"]["subscriptions"]
    assert subscription["forwardTo"] == settings["BUSBAR_CRM_QUEUE"]
    assert "Shipping.OrderAccepted" in body["contracts"]


def test_publishing_an_unknown_event_type_is_404(http: httpx.Client) -> None:
    response = http.post("/api/events/Sales.OrderPlaced", json={"id": 1})

    assert response.status_code == 404


def test_publishing_an_invalid_event_is_400_with_the_contract_errors(http: httpx.Client) -> None:
    response = http.post("/api/events/Billing.InvoiceIssued", json={"order_id": "o", "amount": "many"})

    assert response.status_code == 400
    details = error_of(response)["details"]
    assert "invoice_id: Field required" in details
    assert any(d.startswith("amount: Input should be a valid number") for d in details)


def test_publishing_an_interface_is_400_naming_its_implementers(http: httpx.Client) -> None:
    response = http.post("/api/events/Shipping.IOrderStatusChanged", json={"order_id": "o"})

    assert response.status_code == 400
    assert "Shipping.OrderAccepted" in error_of(response)["details"][0]


def test_a_valid_publish_is_202_with_where_it_went(http: httpx.Client, settings: dict[str, str]) -> None:
    response = http.post("/api/events/Tenant.CustomerCreated", json={"customer_id": "c-1", "name": "Ada"})

    assert response.status_code == 202, response.text
    body = response.json()
    assert body["topic"] == settings["BUSBAR_FALLBACK_TOPIC"]
    assert body["routingMode"] == "CorrelationFilter"
    assert len(body["sent"]) == 1 and body["dropped"] == []


@pytest.mark.parametrize("token", ["NaN", "-Infinity"])
def test_publishing_a_non_finite_number_is_400_listing_the_field(http: httpx.Client, token: str) -> None:
    body = '{"order_id": "o-nan", "amount": ' + token + "}"

    response = http.post(
        "/api/events/Shipping.OrderAccepted", content=body, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400, response.text
    details = error_of(response)["details"]
    assert any(d.startswith("amount: ") and "finite" in d for d in details), details


def test_publishing_needs_only_the_service_bus_connection_not_the_management_settings(
    private_emulator: EmulatorThread, settings: dict[str, str]
) -> None:
    management = ("BUSBAR_SUBSCRIPTION_ID", "BUSBAR_RESOURCE_GROUP", "BUSBAR_NAMESPACE")
    # The topic and queues exist before the host starts, provisioned here: under xdist this test may run in a
    # worker where the module's host (whose startup hook creates them) never started.
    create_queues_and_router(settings)
    # Blank rather than absent: hosts in one process share os.environ; the module's host may have them set.
    publish_only = {**settings, **dict.fromkeys(management, "")}
    with (
        running_host(APP, settings=publish_only, host_json=HOST_JSON) as host,
        httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60
        ) as client,
    ):
        response = client.post(
            "/api/events/Tenant.CustomerCreated", json={"customer_id": "c-2", "name": "Grace"}
        )

    assert response.status_code == 202, response.text
    assert len(response.json()["sent"]) == 1


# ---------------------------------------------------------------------------- ordering keys on the wire


def watch_fallback_topic(settings: Mapping[str, str]) -> str:
    """A fresh catch-all subscription on the fallback topic: a copy of every publish from now on."""
    name = f"watch-{uuid.uuid4().hex[:10]}"
    with management_for(settings) as management:
        management.subscriptions.create_or_update(
            *management.scope, settings["BUSBAR_FALLBACK_TOPIC"], name, SBSubscription()
        )
    return name


def first_copies(
    settings: Mapping[str, str], subscription: str, count: int
) -> list[ServiceBusReceivedMessage]:
    """The first ``count`` messages the subscription received, in the order it received them."""
    received: list[ServiceBusReceivedMessage] = []
    with (
        sdk_client_for(settings) as client,
        client.get_subscription_receiver(settings["BUSBAR_FALLBACK_TOPIC"], subscription) as receiver,
    ):
        while len(received) < count:
            batch = receiver.receive_messages(max_message_count=count - len(received), max_wait_time=30)
            assert batch, f"the subscription received {len(received)} of {count} messages"
            for message in batch:
                receiver.complete_message(message)
            received.extend(batch)
    return received


@pytest.mark.parametrize(
    ("event_type", "payload", "key"),
    [
        ("Tenant.CustomerUpdated", {"customer_id": "c-ordered", "name": "Ada"}, "c-ordered"),
        # OrderAccepted declares no key itself: it inherits order_id from its interfaces.
        ("Shipping.OrderAccepted", {"order_id": "o-ordered", "amount": 3}, "o-ordered"),
    ],
)
def test_a_publish_carries_the_contracts_ordering_key_as_session_id_and_answers_it(
    http: httpx.Client, settings: dict[str, str], event_type: str, payload: dict[str, Any], key: str
) -> None:
    watcher = watch_fallback_topic(settings)

    response = http.post(f"/api/events/{event_type}", json=payload)

    assert response.status_code == 202, response.text
    body = response.json()
    assert body["sessionId"] == key
    assert body["topic"] == settings["BUSBAR_FALLBACK_TOPIC"]
    [sent] = body["sent"]
    [copy] = first_copies(settings, watcher, 1)
    assert text_properties(copy)[MESSAGE_ID] == sent["messageId"]
    assert copy.session_id == key


@pytest.mark.parametrize("empty", ["", "   "])
def test_publishing_with_an_empty_ordering_key_is_400_naming_the_field_and_sends_nothing(
    http: httpx.Client, settings: dict[str, str], empty: str
) -> None:
    watcher = watch_fallback_topic(settings)

    refused = http.post("/api/events/Tenant.CustomerUpdated", json={"customer_id": empty, "name": "Ada"})
    accepted = http.post("/api/events/Tenant.CustomerUpdated", json={"customer_id": "c-after", "name": "Ada"})

    assert refused.status_code == 400, refused.text
    error = error_of(refused)
    assert error["code"] == "ValidationFailed"
    assert "ordering key field 'customer_id' is empty" in error["details"][0], error
    assert accepted.status_code == 202, accepted.text
    # The subscription's first message is the accepted publish: the refused one never reached the topic
    # (no wait for an absence: the broker keeps a subscription's messages in the order they arrived).
    [first] = first_copies(settings, watcher, 1)
    assert text_properties(first)[MESSAGE_ID] == accepted.json()["sent"][0]["messageId"]
    assert first.session_id == "c-after"


# ---------------------------------------------------------------------------- idempotent publishing


def test_the_same_idempotency_key_twice_publishes_one_event_under_one_message_id(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    """A client retrying a publish after a timeout sends the same key: the same MessageId both times, and
    the topic's duplicate detection (every topic Busbar creates has it) keeps one copy. A later publish under
    another key marks the end: the broker keeps a subscription's messages in the order they arrived, so
    everything before it has arrived (no wait for an absence)."""
    watcher = watch_fallback_topic(settings)
    key = f"order-{uuid.uuid4().hex[:8]}"
    payload = {"customer_id": "c-idem", "name": "Ada"}

    first = http.post("/api/events/Tenant.CustomerUpdated", json=payload, headers={"Idempotency-Key": key})
    retried = http.post("/api/events/Tenant.CustomerUpdated", json=payload, headers={"Idempotency-Key": key})
    marker = http.post(
        "/api/events/Tenant.CustomerUpdated", json=payload, headers={"Idempotency-Key": f"{key}-marker"}
    )

    assert [r.status_code for r in (first, retried, marker)] == [202, 202, 202], retried.text
    message_id = first.json()["messageId"]
    assert retried.json()["messageId"] == message_id == first.json()["sent"][0]["messageId"]
    assert first.json()["idempotencyKey"] == key
    assert marker.json()["messageId"] != message_id
    copies = first_copies(settings, watcher, 2)
    assert [c.message_id for c in copies] == [message_id, marker.json()["messageId"]]
    assert text_properties(copies[0])[MESSAGE_ID] == message_id


def test_without_an_idempotency_key_every_publish_is_a_new_event(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    watcher = watch_fallback_topic(settings)
    payload = {"customer_id": "c-twice", "name": "Ada"}

    ids = [
        http.post("/api/events/Tenant.CustomerUpdated", json=payload).json()["messageId"] for _ in range(2)
    ]

    assert ids[0] != ids[1]
    assert [c.message_id for c in first_copies(settings, watcher, 2)] == ids


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("k" * 129, "129 characters long; at most 128"),
        ("", "is empty"),
        ("order\t42", "non-printable character U+0009"),
    ],
)
def test_a_malformed_or_oversized_idempotency_key_is_400_naming_the_problem_and_sends_nothing(
    http: httpx.Client, settings: dict[str, str], key: str, problem: str
) -> None:
    watcher = watch_fallback_topic(settings)
    payload = {"customer_id": "c-badkey", "name": "Ada"}

    refused = http.post("/api/events/Tenant.CustomerUpdated", json=payload, headers={"Idempotency-Key": key})
    accepted = http.post("/api/events/Tenant.CustomerUpdated", json=payload)

    assert refused.status_code == 400, refused.text
    error = error_of(refused)
    assert error["code"] == "ValidationFailed" and "Idempotency-Key" in error["message"], error
    assert problem in error["details"][0], error
    [first] = first_copies(settings, watcher, 1)
    assert first.message_id == accepted.json()["messageId"]


def _fresh_endpoint(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (
            {"type": "Shipping.OrderAccepted", "filter": "amount >= 1000 AND"},
            "filter of Shipping.OrderAccepted: expected a condition or a value, found the end of the filter "
            "at position 19",
        ),
        (
            {"type": "Shipping.OrderAccepted", "filter": "total >= 1000"},
            "SQL filter of Shipping.OrderAccepted: property 'total' at position 1 is not promoted by "
            "Shipping.OrderAccepted (promoted: amount, region)",
        ),
        (
            {"type": "Shipping.OrderAccepted", "filter": {"country": "nl"}},
            "correlation filter of Shipping.OrderAccepted: property 'country' is not promoted by "
            "Shipping.OrderAccepted (promoted: amount, region)",
        ),
    ],
)
def test_a_filter_that_cannot_work_is_400_naming_the_problem_and_nothing_is_provisioned(
    http: httpx.Client, settings: dict[str, str], event: dict[str, Any], problem: str
) -> None:
    endpoint = _fresh_endpoint("analytics")

    response = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": [event]})

    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["code"] == "ValidationFailed"
    assert error["details"][0].startswith(problem), error["details"]
    with management_for(settings) as management:
        assert endpoint not in [q.name for q in management.queues.list_by_namespace(*management.scope)]
    assert http.get(f"/api/endpoints/{endpoint}/subscriptions").json()["subscriptions"] == []


def test_a_correlation_filter_for_another_subscriber_round_trips_plan_apply_and_delivery(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    endpoint = _fresh_endpoint("analytics")
    url = f"/api/endpoints/{endpoint}/subscriptions"
    emea = {"type": "Shipping.OrderAccepted", "filter": {"region": "emea"}}
    rule = f"{settings['BUSBAR_FALLBACK_TOPIC']}/Subscriptions/{endpoint}/Rules/Shipping.OrderAccepted"

    planned = http.put(url, json={"events": [emea], "dryRun": True})
    applied = http.put(url, json={"events": [emea]})
    listed = http.get(url)
    orders = {"eu": "emea", "us": "amer"}
    published = [
        http.post("/api/events/Shipping.OrderAccepted", json={"order_id": f"{o}-{endpoint}", "region": r})
        for o, r in orders.items()
    ]

    assert planned.status_code == 200, planned.text
    [planned_rule] = [i for i in planned.json()["plan"]["items"] if i["path"] == rule]
    assert planned_rule["action"] == "create"
    assert planned_rule["details"]["properties"] == {"Shipping.OrderAccepted": True, "region": "emea"}
    assert applied.status_code == 201, applied.text
    [subscription] = listed.json()["subscriptions"]
    rules = {r["name"].lower(): r for r in subscription["rules"]}
    assert rules["$default"]["sqlExpression"] == "1=0"  # no match-all rule beside the filter
    assert rules["shipping.orderaccepted"]["properties"] == {"Shipping.OrderAccepted": True, "region": "emea"}
    assert all(p.status_code == 202 for p in published), [p.text for p in published]
    with sdk_client_for(settings) as client, client.get_queue_receiver(endpoint, max_wait_time=5) as receiver:
        received = [json.loads(str(m))["order_id"] for m in receiver.receive_messages(max_message_count=10)]
        received += [json.loads(str(m))["order_id"] for m in receiver.receive_messages(max_message_count=10)]
    assert received == [f"eu-{endpoint}"]

    # A changed condition rewrites the rule in place; dropping it gives the event's plain rule back.
    changed = http.put(url, json={"events": [{**emea, "filter": {"region": "apac"}}]})
    dropped = http.put(url, json={"events": ["Shipping.OrderAccepted"]})

    for response, properties in (
        (changed, {"Shipping.OrderAccepted": True, "region": "apac"}),
        (dropped, {"Shipping.OrderAccepted": True}),
    ):
        assert response.status_code == 200, response.text
        [item] = [i for i in response.json()["plan"]["items"] if i["path"] == rule]
        assert item["action"] == "update" and item["details"]["desired"]["properties"] == properties
        assert response.json()["result"]["updated"] == [rule]
    [after] = http.get(url).json()["subscriptions"]
    assert {r["name"].lower(): r.get("properties") for r in after["rules"]} == {
        "$default": None,
        "shipping.orderaccepted": {"Shipping.OrderAccepted": True},
    }


def test_dropping_a_filter_over_http_gives_the_subscription_its_match_all_rule_back_and_deletes_the_filter(
    http: httpx.Client,
) -> None:
    endpoint = _fresh_endpoint("reports")
    url = f"/api/endpoints/{endpoint}/subscriptions"
    topic = f"orders-{endpoint}"  # an explicit topic: the event's subscription there is NotMultiplexed
    plain = {"type": "Shipping.OrderAccepted", "topic": topic}

    filtered = http.put(url, json={"events": [{**plain, "filter": "amount >= 1000"}]})
    first = {
        r["name"].lower(): r.get("sqlExpression") for r in http.get(url).json()["subscriptions"][0]["rules"]
    }
    dropped = http.put(url, json={"events": [plain]})
    after = {
        r["name"].lower(): r.get("sqlExpression") for r in http.get(url).json()["subscriptions"][0]["rules"]
    }

    assert filtered.status_code == 201, filtered.text
    assert first == {"$default": "1=0", "shipping.orderaccepted": "amount >= 1000"}
    assert dropped.status_code == 200, dropped.text
    actions = {(i["action"], i["path"].rsplit("/", 1)[-1].lower()) for i in dropped.json()["plan"]["items"]}
    assert {("update", "$default"), ("delete", "shipping.orderaccepted")} <= actions
    assert after == {"$default": "1=1"}
