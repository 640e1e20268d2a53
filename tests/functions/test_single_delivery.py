"""One delivery per subscriber under devhost + the emulator: the sample app publishing to the fallback
topic, the router bridging, and an endpoint moved from the fallback topic to a dedicated topic.

The double delivery of issue 25: billing receives ``Shipping.OrderAccepted`` through its rule on the
fallback topic; giving it a subscription on the dedicated topic too made the router bridge every order
there, so billing invoiced each order twice and shipping shipped twice.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus.models import (
    SBQueue,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
    SBTopicProperties,
)

from app import runtime
from devhost.testing import running_host
from emulator.server import EmulatorOptions, EmulatorThread
from shared.topology.cli import run
from tests.functions.busbar_app import (
    APP,
    HOST_JSON,
    app_settings,
    create_queues_and_router,
    management_for,
    sdk_client_for,
)
from tests.functions.handled_record import HandledRecord

WAIT = 30.0
ORDER_ACCEPTED = "Shipping.OrderAccepted"


class App:
    def __init__(self, settings: dict[str, str], http: httpx.Client, record: HandledRecord) -> None:
        self.settings = settings
        self.http = http
        self.record = record

    def put(self, endpoint: str, events: list[Any]) -> httpx.Response:
        return self.http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})

    def order(self, order_id: str) -> None:
        response = self.http.post(f"/api/events/{ORDER_ACCEPTED}", json={"order_id": order_id, "amount": 5})
        assert response.status_code == 202, response.text


@pytest.fixture
def single_delivery_emulator() -> Iterator[EmulatorThread]:
    """An emulator of the test's own: the topics are named after contracts (``Shipping.OrderAccepted``), so a
    path one test makes (a dedicated subscription for billing) would change what the next one sees."""
    thread = EmulatorThread(EmulatorOptions(amqp_port=0, management_port=0))
    thread.start()
    try:
        yield thread
    finally:
        runtime.reset()
        thread.stop()


@pytest.fixture
def app(single_delivery_emulator: EmulatorThread, tmp_path: Path) -> Iterator[App]:
    # The handlers run in the worker process: the tests read what they handled from the app's test probe.
    record = HandledRecord(tmp_path / "probe.jsonl")
    # The router reads the namespace for every event, so what it decides follows each change at once.
    settings = app_settings(single_delivery_emulator, BUSBAR_ROUTER_SNAPSHOT_SECONDS="0", **record.settings)
    with (
        running_host(
            APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
        ) as host,
        httpx.Client(base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60) as http,
    ):
        running = App(settings, http, record)
        for endpoint, events in (
            ("billing", [ORDER_ACCEPTED, "Shipping.OrderAcceptedV2"]),
            ("crm", ["Shipping.IOrderStatusChanged"]),
            ("shipping", ["Billing.InvoiceIssued"]),
        ):
            response = running.put(endpoint, events)
            assert response.status_code == 201, response.text
        yield running


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def handled(app: App, key: str) -> list[str]:
    return sorted(e.endpoint for e in app.record.entries(key))


def orders_handled_once(app: App, count: int) -> dict[str, list[str]]:
    """Publish ``count`` orders, wait until each is invoiced, shipped and tracked, then publish a last order
    and wait for it too: it goes the same ways, after any second copy of the others (each path is first
    in, first out), so a double delivery would show by then."""
    orders = [f"order-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    for order in orders:
        app.order(order)
    wait_for(lambda: all(len(handled(app, o)) >= 3 for o in orders), "every order handled")
    last = f"last-{uuid.uuid4().hex[:10]}"
    app.order(last)
    wait_for(lambda: len(handled(app, last)) >= 3, "the last order handled")
    return {o: handled(app, o) for o in [*orders, last]}


def cli(app: App, tmp_path: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """``python -m shared.topology`` with the guide's topology.json, against the app's namespace."""
    options = tmp_path / "topology.json"
    options.write_text(
        json.dumps(
            {
                "$type": "topology-options",
                "FallbackTopic": {
                    "TopicName": app.settings["BUSBAR_FALLBACK_TOPIC"],
                    "RoutingMode": "CorrelationFilter",
                },
                "SubscribedEventToTopicsMap": {ORDER_ACCEPTED: ORDER_ACCEPTED},
            }
        )
    )
    argv = [*args, "--options", str(options), "--endpoint", app.settings["BUSBAR_BILLING_QUEUE"]]
    out = io.StringIO()
    code = run([*argv, "--events", ORDER_ACCEPTED], out, app.settings)
    decoder, text, documents, position = json.JSONDecoder(), out.getvalue(), [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return code, documents


def test_applying_a_dedicated_topic_for_an_event_billing_gets_on_the_fallback_topic_is_refused(
    app: App, tmp_path: Path
) -> None:
    fallback, billing = app.settings["BUSBAR_FALLBACK_TOPIC"], app.settings["BUSBAR_BILLING_QUEUE"]

    code, (refusal,) = cli(app, tmp_path, "apply")

    assert code == 2
    assert refusal["error"] == "duplicate-delivery"
    [message] = refusal["errors"]
    assert f"{fallback}/{billing}/{ORDER_ACCEPTED} (existing)" in message
    assert f"{ORDER_ACCEPTED}/{billing} (added)" in message
    assert "--migrate" in message
    with management_for(app.settings) as management, pytest.raises(ResourceNotFoundError):
        management.topics.get(*management.scope, ORDER_ACCEPTED)
    assert all(h == ["billing", "crm", "shipping"] for h in orders_handled_once(app, 3).values())


def test_a_put_that_lists_an_event_on_two_topics_is_409_naming_both_paths(app: App) -> None:
    fallback = app.settings["BUSBAR_FALLBACK_TOPIC"]
    events = [
        {"type": ORDER_ACCEPTED, "topic": fallback},
        {"type": ORDER_ACCEPTED, "topic": ORDER_ACCEPTED},
        "Shipping.OrderAcceptedV2",
    ]

    response = app.put("billing", events)

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "DuplicateDelivery"
    [duplicate] = error["duplicates"]
    billing = app.settings["BUSBAR_BILLING_QUEUE"]
    assert duplicate["existing"] == [f"{fallback}/{billing}/{ORDER_ACCEPTED}"]
    assert duplicate["added"] == [f"{ORDER_ACCEPTED}/{billing}"]
    with management_for(app.settings) as management, pytest.raises(ResourceNotFoundError):
        management.topics.get(*management.scope, ORDER_ACCEPTED)


def test_the_router_sends_no_copy_to_a_subscriber_that_got_the_event_on_the_fallback_topic(
    app: App,
) -> None:
    """A second path made behind Busbar's back (through ARM directly): crm follows declined orders on the
    fallback topic and also subscribes on their dedicated topic. The router sends crm no bridged copy,
    and still serves the topic's other subscriber (a watcher queue) straight."""
    topic, crm = "Shipping.OrderDeclined", app.settings["BUSBAR_CRM_QUEUE"]
    watcher = f"watch-{uuid.uuid4().hex[:8]}"
    with management_for(app.settings) as management:
        group, namespace = management.scope
        management.queues.create_or_update(group, namespace, watcher, SBQueue())
        # With duplicate detection, as Busbar creates (and requires of) every topic it publishes to.
        deduplicated = SBTopicProperties(
            requires_duplicate_detection=True, duplicate_detection_history_time_window=timedelta(minutes=10)
        )
        management.topics.create_or_update(group, namespace, topic, SBTopic(properties=deduplicated))
        for target in (crm, watcher):
            management.subscriptions.create_or_update(
                group,
                namespace,
                topic,
                target,
                SBSubscription(properties=SBSubscriptionProperties(forward_to=target)),
            )
    try:
        order = f"declined-{uuid.uuid4().hex[:10]}"
        response = app.http.post(f"/api/events/{topic}", json={"order_id": order, "reason": "none"})
        assert response.status_code == 202, response.text

        with (
            sdk_client_for(app.settings) as client,
            client.get_queue_receiver(watcher, max_wait_time=WAIT) as receiver,
        ):
            [copy] = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            receiver.complete_message(copy)
        # The router has routed the order; crm handles what its queue holds in order, so once it has
        # tracked a later order too, a bridged copy of this one would have been handled.
        assert json.loads(b"".join(copy.body))["order_id"] == order
        later = orders_handled_once(app, 1)
        assert handled(app, order) == ["crm"]
        assert all(h == ["billing", "crm", "shipping"] for h in later.values())
    finally:
        with management_for(app.settings) as management:
            management.topics.delete(*management.scope, topic)


def test_a_put_that_moves_an_event_to_its_topic_deletes_the_old_path_after_the_new_one_exists(
    app: App,
) -> None:
    fallback, shipping = app.settings["BUSBAR_FALLBACK_TOPIC"], app.settings["BUSBAR_SHIPPING_QUEUE"]
    invoices = "Billing.InvoiceIssued"

    response = app.put("shipping", [{"type": invoices, "topic": invoices}])

    assert response.status_code == 201, response.text
    body = response.json()
    # shipping's fallback subscription served only invoices: the PUT deletes all of it.
    old_path = f"{fallback}/Subscriptions/{shipping}"
    [delete] = [i for i in body["plan"]["items"] if i["action"] == "delete"]
    assert delete["path"] == old_path
    assert body["result"]["deleted"] == [old_path]
    assert f"{invoices}/Subscriptions/{shipping}" in body["result"]["created"]
    # shipping now gets the invoices billing publishes through the router's bridge, once each.
    assert all(h == ["billing", "crm", "shipping"] for h in orders_handled_once(app, 3).values())


def test_after_a_declared_migration_every_order_is_handled_once_per_subscriber(
    app: App, tmp_path: Path
) -> None:
    fallback, billing = app.settings["BUSBAR_FALLBACK_TOPIC"], app.settings["BUSBAR_BILLING_QUEUE"]

    code, (planned,) = cli(app, tmp_path, "plan", "--migrate")
    assert code == 0, planned
    code, (shown, applied) = cli(app, tmp_path, "apply", "--migrate")

    assert code == 0, shown
    assert shown == planned
    assert f"{ORDER_ACCEPTED}/Subscriptions/{billing}" in applied["applied"]["created"]
    assert applied["applied"]["deleted"] == [f"{fallback}/Subscriptions/{billing}/Rules/{ORDER_ACCEPTED}"]
    with management_for(app.settings) as management:
        subscription = management.subscriptions.get(*management.scope, ORDER_ACCEPTED, billing)
        assert subscription.forward_to == billing
        rules = management.rules.list_by_subscriptions(*management.scope, fallback, billing)
        assert sorted(r.name.lower() for r in rules) == ["$default", "shipping.orderacceptedv2"]
    # billing now receives orders through the router's bridge only; crm and shipping as before.
    assert all(h == ["billing", "crm", "shipping"] for h in orders_handled_once(app, 5).values())
    code, (again,) = cli(app, tmp_path, "plan")
    assert code == 0 and again["plan"]["summary"]["create"] == 0
