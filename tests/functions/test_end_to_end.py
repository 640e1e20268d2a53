"""End to end under devhost + the emulator: HTTP provisioning, publishing over HTTP and with the SDK, the
sample handlers, dead-lettering, and the fallback router.

One host serves the whole module (starting one costs seconds); every test uses its own order and customer
ids, so the handled events it waits for are its own. The handlers run in the host's worker process: the
tests read what they handled from the app's test probe (``BUSBAR_PROBE_RECORD``).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.amqp import AmqpAnnotatedMessage

from app.endpoints.sample.events import (
    CustomerCreated,
    CustomerDeleted,
    CustomerUpdated,
    InvoiceIssued,
    OrderAccepted,
    OrderAcceptedV2,
    OrderDeclined,
    PaymentReceived,
)
from devhost.testing import HostHandle, running_host
from emulator.server import EmulatorThread
from shared.archive.reader import read_archive
from shared.contracts import ENCLOSED_MESSAGE_TYPES, Event
from shared.handlers.dispatch import NO_HANDLER, PAYLOAD_VALIDATION_FAILED, PERMANENT_HANDLER_ERROR
from shared.router.decision import BRIDGED_FROM, NO_MATCHING_SUBSCRIPTION
from shared.topology import Publisher, load_topology_options
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


class App:
    """The running app as a test sees it: settings, host, an HTTP client with the function key."""

    def __init__(
        self, settings: dict[str, str], host: HostHandle, archive: Path, record: HandledRecord
    ) -> None:
        self.settings = settings
        self.host = host
        self.archive = archive
        self.record = record
        self.http = httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60.0
        )

    def put(self, endpoint: str, events: list[Any], dry_run: bool = False) -> httpx.Response:
        body = {"events": events, "dryRun": dry_run}
        return self.http.put(f"/api/endpoints/{endpoint}/subscriptions", json=body)

    def publish(self, event_type: str, payload: dict[str, Any]) -> httpx.Response:
        return self.http.post(f"/api/events/{event_type}", json=payload)


@pytest.fixture(scope="module")
def app(private_emulator: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    archive = tmp_path_factory.mktemp("archive")
    record = HandledRecord(tmp_path_factory.mktemp("handled") / "probe.jsonl")
    settings = app_settings(
        private_emulator,
        BUSBAR_ARCHIVE_URL=str(archive),
        BUSBAR_ROUTER_SNAPSHOT_SECONDS="0",
        **record.settings,
    )
    with running_host(
        APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
    ) as host:
        running = App(settings, host, archive, record)
        yield running
        running.http.close()


@pytest.fixture(scope="module")
def provisioned(app: App) -> App:
    """billing and crm subscribed over HTTP (shipping is not: what billing publishes stays unrouted)."""
    billing = app.put("billing", ["Shipping.OrderAccepted", "Shipping.OrderAcceptedV2"])
    crm = app.put("crm", ["Tenant.ICustomerLifecycleEvent", {"type": "Shipping.IOrderStatusChanged"}])
    assert billing.status_code == 201, billing.text
    assert crm.status_code == 201, crm.text
    return app


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def handled(app: App, key: str) -> list[tuple[str, str]]:
    return sorted((e.endpoint, e.contract) for e in app.record.entries(key))


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ----------------------------------------------------------------------------------------------- routing


# Every sample event, the key it carries, and which (endpoint, contract) handler calls it must cause when
# billing and crm are subscribed as in ``provisioned`` (shipping is not: nobody handles InvoiceIssued, and
# no sample endpoint ever subscribes to PaymentReceived).
SAMPLES: list[tuple[type[Event], str, dict[str, Any], list[tuple[str, str]]]] = [
    (
        OrderAccepted,
        "order_id",
        {"amount": 12.5},
        [("billing", "Shipping.OrderAccepted"), ("crm", "Shipping.OrderAccepted")],
    ),
    (OrderDeclined, "order_id", {"reason": "out of stock"}, [("crm", "Shipping.OrderDeclined")]),
    (
        OrderAcceptedV2,
        "order_id",
        {"amount": 3, "currency": "USD"},
        [("billing", "Shipping.OrderAcceptedV2"), ("crm", "Shipping.OrderAcceptedV2")],
    ),
    (CustomerCreated, "customer_id", {"name": "Ada"}, [("crm", "Tenant.CustomerCreated")]),
    (CustomerUpdated, "customer_id", {"name": "Ada L."}, [("crm", "Tenant.CustomerUpdated")]),
    (CustomerDeleted, "customer_id", {}, [("crm", "Tenant.CustomerDeleted")]),
    (InvoiceIssued, "order_id", {"invoice_id": "i-1"}, []),
    (PaymentReceived, "order_id", {"amount": 7}, []),
]


def test_each_endpoint_handles_exactly_the_events_it_subscribes_to_over_http_and_sdk(
    provisioned: App,
) -> None:
    app = provisioned
    expected: dict[str, list[tuple[str, str]]] = {}
    invoiced: set[str] = set()  # orders billing invoices, and invoices published directly
    paid: set[str] = set()  # payments, which no endpoint subscribes to
    sdk_events: list[Event] = []
    for event_type, key_field, fields, calls in SAMPLES:
        over_http, over_sdk = fresh("http"), fresh("sdk")
        response = app.publish(event_type.contract_name, {key_field: over_http, **fields})
        assert response.status_code == 202, response.text
        assert response.json()["sent"][0]["eventType"] == event_type.contract_name
        sdk_events.append(event_type.model_validate({key_field: over_sdk, **fields}))
        expected[over_http] = expected[over_sdk] = sorted(calls)
        if ("billing", event_type.contract_name) in calls or event_type is InvoiceIssued:
            invoiced |= {over_http, over_sdk}
        if event_type is PaymentReceived:
            paid |= {over_http, over_sdk}
    with (
        sdk_client_for(app.settings) as client,
        Publisher(client, load_topology_options(app.settings), endpoint_name="sdk-test") as publisher,
    ):
        result = publisher.publish(sdk_events)
    assert len(result.sent) == len(SAMPLES)

    wait_for(lambda: all(len(handled(app, k)) >= len(v) for k, v in expected.items()), "every handler call")
    # Invoices reach no subscription: the router records each one, which also gives every other delivery
    # the time to happen, so the comparison below would see an event handled twice or at the wrong endpoint.
    wait_for(
        lambda: len(_archived(app, "Billing.InvoiceIssued", invoiced)) == len(invoiced),
        "the unrouted invoices",
    )
    wait_for(lambda: len(_archived(app, "Billing.PaymentReceived", paid)) == len(paid), "the payments")
    assert {k: handled(app, k) for k in expected} == expected


def test_a_high_value_order_reaches_sales_and_billing_and_a_small_one_only_billing(provisioned: App) -> None:
    # sales' handler is registered where="amount >= 1000": the PUT naming its event subscribes under it.
    sales = provisioned.put("sales", ["Shipping.OrderAccepted"])
    assert sales.status_code == 201, sales.text
    big, small = fresh("big"), fresh("small")

    for order, amount in ((big, 5000), (small, 10)):
        response = provisioned.publish("Shipping.OrderAccepted", {"order_id": order, "amount": amount})
        assert response.status_code == 202, response.text

    accepted = "Shipping.OrderAccepted"
    wait_for(lambda: len(handled(provisioned, big)) == 3, "billing, crm and sales handling the big order")
    wait_for(lambda: len(handled(provisioned, small)) == 2, "billing and crm handling the small order")
    assert handled(provisioned, big) == [("billing", accepted), ("crm", accepted), ("sales", accepted)]
    assert handled(provisioned, small) == [("billing", accepted), ("crm", accepted)]
    [subscription] = provisioned.http.get("/api/endpoints/sales/subscriptions").json()["subscriptions"]
    rules = {r["name"].lower(): r.get("sqlExpression") for r in subscription["rules"]}
    assert rules == {"$default": "1=0", "shipping.orderaccepted": f"[{accepted}] = TRUE AND (amount >= 1000)"}
    # Nothing dead-lettered at sales: the small order never reached it (the broker's rule, not its handler).
    with management_for(provisioned.settings) as management:
        queue = management.queues.get(*management.scope, provisioned.settings["BUSBAR_SALES_QUEUE"])
    assert queue.count_details is not None and queue.count_details.dead_letter_message_count == 0


def test_a_put_giving_a_hosted_endpoint_another_filter_than_its_handlers_is_400(provisioned: App) -> None:
    event = {"type": "Shipping.OrderAccepted", "filter": "amount >= 1"}

    response = provisioned.put("sales", [event], dry_run=True)

    assert response.status_code == 400, response.text
    [problem] = response.json()["error"]["details"]
    assert problem.startswith(
        "Shipping.OrderAccepted: endpoint sales's handlers subscribe where 'amount >= 1000'"
    )


def test_handlers_publish_with_the_incoming_correlation_carried_over(provisioned: App) -> None:
    order = fresh("corr")
    response = provisioned.http.post(
        "/api/events/Shipping.OrderAccepted",
        params={"correlationId": f"c-{order}"},
        json={"order_id": order, "amount": 2},
    )
    assert response.status_code == 202, response.text

    wait_for(lambda: len(_archived(provisioned, "Billing.InvoiceIssued", {order})) == 1, "the invoice")
    invoice = _archived(provisioned, "Billing.InvoiceIssued", {order})[0]
    assert invoice["correlation_id"] == f"c-{order}"
    properties = json.loads(invoice["application_properties"])
    assert properties["NServiceBus.OriginatingEndpoint"] == "billing"
    assert properties["NServiceBus.RelatedTo"]  # the message id of the OrderAccepted billing handled
    assert provisioned.record.entries(order)[0].correlation_id == f"c-{order}"


# ----------------------------------------------------------------------------------------------- dead-letters


def _dead_letters(app: App, queue: str, message_id: str) -> list[Any]:
    found: list[Any] = []
    with (
        sdk_client_for(app.settings) as client,
        client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver,
    ):
        deadline = time.monotonic() + WAIT
        while not found and time.monotonic() < deadline:
            found = [m for m in receiver.peek_messages(max_message_count=100) if m.message_id == message_id]
            if not found:
                time.sleep(0.1)
    return found


def _send_to_fallback(app: App, message: ServiceBusMessage) -> None:
    with (
        sdk_client_for(app.settings) as client,
        client.get_topic_sender(app.settings["BUSBAR_FALLBACK_TOPIC"]) as sender,
    ):
        sender.send_messages(message)


def _legacy(contract_header: str, body: object, **stamps: bool) -> ServiceBusMessage:
    properties: dict[str | bytes, Any] = {ENCLOSED_MESSAGE_TYPES: contract_header}
    properties.update(stamps)
    return ServiceBusMessage(
        json.dumps(body),
        message_id=fresh("msg"),
        content_type="application/json",
        application_properties=properties,
    )


def test_a_poison_payload_is_dead_lettered_after_one_delivery_with_the_precise_reason(
    provisioned: App,
) -> None:
    message = _legacy(
        "Shipping.OrderAccepted;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged",
        {"amount": "lots"},
        **{"Shipping.OrderAccepted": True, "Shipping.IOrderStatusChanged": True},
    )
    _send_to_fallback(provisioned, message)

    [dead] = _dead_letters(provisioned, provisioned.settings["BUSBAR_BILLING_QUEUE"], str(message.message_id))
    assert dead.dead_letter_reason == PAYLOAD_VALIDATION_FAILED
    assert "order_id: Field required" in (dead.dead_letter_error_description or "")
    # Dead-lettered on its first delivery: the SDK counts earlier (failed) deliveries, none here.
    assert dead.delivery_count == 0
    # crm is ordered: its queue requires sessions and takes no message without a SessionId (no key could be
    # read from this body), so the broker dead-letters crm's copy in the subscription that forwards it.
    [refused] = _subscription_dead_letters(provisioned, "BUSBAR_CRM_QUEUE", str(message.message_id))
    assert "SessionId" in (refused.dead_letter_error_description or "")


def _subscription_dead_letters(app: App, queue_setting: str, message_id: str) -> list[Any]:
    topic = app.settings["BUSBAR_FALLBACK_TOPIC"]
    with management_for(app.settings) as management:
        [subscription] = [
            s.name
            for s in management.subscriptions.list_by_topic(*management.scope, topic)
            if (s.forward_to or "").lower() == app.settings[queue_setting].lower()
        ]
    found: list[Any] = []
    with (
        sdk_client_for(app.settings) as client,
        client.get_subscription_receiver(
            topic, subscription, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver,
    ):
        deadline = time.monotonic() + WAIT
        while not found and time.monotonic() < deadline:
            found = [m for m in receiver.peek_messages(max_message_count=100) if m.message_id == message_id]
            if not found:
                time.sleep(0.1)
    return found


EXTENSION_ACTIONS = (
    "azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions.ServiceBusMessageActions"
)
# What the extension's converter yields: the SDK's message class, decoded from the host's AMQP bytes.
SDK_MESSAGE = "azure.servicebus._common.message.ServiceBusReceivedMessage"


def test_subscribers_and_router_get_the_extensions_objects_and_subscribers_settle_over_grpc(
    provisioned: App,
) -> None:
    good = fresh("grpc")
    assert provisioned.publish("Shipping.OrderAccepted", {"order_id": good, "amount": 1}).status_code == 202
    poison = _legacy(
        "Shipping.OrderAccepted;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged",
        {"amount": "lots"},
        **{"Shipping.OrderAccepted": True, "Shipping.IOrderStatusChanged": True},
    )
    _send_to_fallback(provisioned, poison)
    wait_for(
        lambda: ("billing", "Shipping.OrderAccepted") in handled(provisioned, good),
        "billing handling the order",
    )
    _dead_letters(provisioned, provisioned.settings["BUSBAR_BILLING_QUEUE"], str(poison.message_id))

    def settled(records: list[Any]) -> bool:
        calls = [c for r in records if r.function_name == "billing_subscriber" for c in r.settlement_calls]
        return "Complete" in calls and "Deadletter" in calls

    records = provisioned.host.wait_for_invocations(settled, timeout=WAIT)
    subscribers = [r for r in records if r.function_name.endswith("_subscriber")]
    assert subscribers
    for record in subscribers:
        assert dict(record.bound) == {"message": SDK_MESSAGE, "message_actions": EXTENSION_ACTIONS}
        # Every message was settled by the function itself, once, through the host's Settlement service.
        assert len(record.settlement_calls) == 1
        assert record.settlement_calls[0] in {"Complete", "Deadletter", "Abandon"}
    routed = [r for r in records if r.function_name == "fallback_router"]
    assert routed
    for record in routed:
        assert dict(record.bound) == {"message": SDK_MESSAGE}
        assert record.settlement_calls == ()  # autoComplete: the host settles, not the function


def test_a_permanent_handler_error_dead_letters_only_at_the_endpoint_that_raised_it(provisioned: App) -> None:
    order = fresh("neg")
    response = provisioned.publish("Shipping.OrderAccepted", {"order_id": order, "amount": -5})
    message_id = response.json()["sent"][0]["messageId"]
    assert response.status_code == 202

    wait_for(
        lambda: handled(provisioned, order) == [("crm", "Shipping.OrderAccepted")], "crm handling the order"
    )
    billing_queue = provisioned.settings["BUSBAR_BILLING_QUEUE"]
    candidates = _dead_letters_with(provisioned, billing_queue, lambda m: order.encode() in b"".join(m.body))
    assert len(candidates) == 1
    dead = candidates[0]
    assert dead.dead_letter_reason == PERMANENT_HANDLER_ERROR
    assert "negative amount" in (dead.dead_letter_error_description or "")
    assert dead.application_properties[b"NServiceBus.MessageId"].decode() == message_id


def _dead_letters_with(app: App, queue: str, match: Callable[[Any], bool]) -> list[Any]:
    with (
        sdk_client_for(app.settings) as client,
        client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver,
    ):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            found = [m for m in receiver.peek_messages(max_message_count=250) if match(m)]
            if found:
                return found
            time.sleep(0.1)
    return []


def test_a_known_event_the_endpoint_has_no_handler_for_is_dead_lettered_as_no_handler(
    provisioned: App,
) -> None:
    message = _legacy("Tenant.CustomerCreated;Tenant.ICustomerLifecycleEvent", {"customer_id": fresh("x")})
    queue = provisioned.settings["BUSBAR_BILLING_QUEUE"]
    with sdk_client_for(provisioned.settings) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(message)

    [dead] = _dead_letters(provisioned, queue, str(message.message_id))
    assert dead.dead_letter_reason == NO_HANDLER
    assert "'billing' has no handler for 'Tenant.CustomerCreated'" in (
        dead.dead_letter_error_description or ""
    )


# ----------------------------------------------------------------------------------------------- router


def _archived(app: App, contract: str, keys: set[str]) -> list[dict[str, Any]]:
    if not any(app.archive.rglob("*.parquet")):
        return []
    rows = read_archive(str(app.archive)).to_pylist()
    return [
        r
        for r in rows
        if r["contract_type"] == contract and any(k.encode() in (r["body"] or b"") for k in keys)
    ]


def test_an_event_no_subscription_matches_is_archived_as_unrouted(
    provisioned: App, caplog: pytest.LogCaptureFixture
) -> None:
    key = fresh("lost")
    message = _legacy(
        "Sales.OrderPlaced, Sales;Sales.IOrderEvent", {"order": key}, **{"Sales.OrderPlaced": True}
    )
    _send_to_fallback(provisioned, message)

    wait_for(lambda: len(_archived(provisioned, "Sales.OrderPlaced", {key})) == 1, "the unrouted record")
    [row] = _archived(provisioned, "Sales.OrderPlaced", {key})
    assert row["decision"] == NO_MATCHING_SUBSCRIPTION
    assert row["dead_letter_reason"] == NO_MATCHING_SUBSCRIPTION
    assert row["message_id"] == message.message_id
    assert row["source_entity"] == provisioned.settings["BUSBAR_FALLBACK_TOPIC"]
    assert "no subscription on topic" in row["decision_detail"]
    # ... and logged as unrouted by the worker (where the router counts it), relogged by the host as the
    # function's own log.
    topic = provisioned.settings["BUSBAR_FALLBACK_TOPIC"]
    logged = f"unrouted event Sales.OrderPlaced (message {message.message_id}) on {topic}: "

    def unrouted_logs() -> list[logging.LogRecord]:
        return [
            r
            for r in list(caplog.records)
            if r.name == "Function.fallback_router.User" and r.getMessage().startswith(logged)
        ]

    wait_for(lambda: bool(unrouted_logs()), "the router's warning")
    assert [r.levelno for r in unrouted_logs()] == [logging.WARNING]


def test_the_router_bridges_to_the_dedicated_topic_preserving_the_message(provisioned: App) -> None:
    app = provisioned
    dedicated = "Tenant.CustomerUpdated"
    watcher = fresh("watch")
    with management_for(app.settings) as management:
        from azure.mgmt.servicebus.models import SBSubscription, SBTopic, SBTopicProperties

        group, namespace = management.scope
        # With duplicate detection, as Busbar creates (and requires of) every topic it publishes to.
        deduplicated = SBTopicProperties(
            requires_duplicate_detection=True, duplicate_detection_history_time_window=timedelta(minutes=10)
        )
        management.topics.create_or_update(group, namespace, dedicated, SBTopic(properties=deduplicated))
        management.subscriptions.create_or_update(group, namespace, dedicated, watcher, SBSubscription())
    customer = fresh("bridged")
    message = _legacy(
        "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent",
        {"customer_id": customer, "name": "Ada"},
        **{"Tenant.CustomerUpdated": True, "Tenant.ICustomerLifecycleEvent": True},
    )
    message.session_id = "session-7"
    message.application_properties = {**(message.application_properties or {}), "tenant": "acme"}
    _send_to_fallback(app, message)

    with (
        sdk_client_for(app.settings) as client,
        client.get_subscription_receiver(dedicated, watcher, max_wait_time=WAIT) as receiver,
    ):
        [copy] = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        receiver.complete_message(copy)
    assert copy.message_id == message.message_id
    assert copy.session_id == "session-7"
    assert json.loads(b"".join(copy.body)) == {"customer_id": customer, "name": "Ada"}
    assert copy.content_type == "application/json"
    properties = copy.application_properties or {}
    assert properties[b"tenant"] == b"acme"
    assert properties[b"Tenant.CustomerUpdated"] is True
    assert properties[BRIDGED_FROM.encode()] == app.settings["BUSBAR_FALLBACK_TOPIC"].encode()
    # crm still receives it on the fallback topic, and a bridged event is not an unrouted one.
    wait_for(
        lambda: handled(app, customer) == [("crm", "Tenant.CustomerUpdated")], "crm handling the customer"
    )
    assert _archived(app, "Tenant.CustomerUpdated", {customer}) == []


def test_the_router_gives_a_bridged_event_without_a_session_id_its_ordering_key(provisioned: App) -> None:
    # A .NET publisher that sets no SessionId: the app's router reads the key with the app's contracts.
    app = provisioned
    dedicated = "Tenant.CustomerUpdated"
    watcher = fresh("watch")
    with management_for(app.settings) as management:
        from azure.mgmt.servicebus.models import SBSubscription, SBTopic, SBTopicProperties

        group, namespace = management.scope
        # With duplicate detection, as Busbar creates (and requires of) every topic it publishes to.
        deduplicated = SBTopicProperties(
            requires_duplicate_detection=True, duplicate_detection_history_time_window=timedelta(minutes=10)
        )
        management.topics.create_or_update(group, namespace, dedicated, SBTopic(properties=deduplicated))
        management.subscriptions.create_or_update(group, namespace, dedicated, watcher, SBSubscription())
    customer = fresh("unkeyed")
    message = _legacy(
        "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent",
        {"customer_id": customer},
        **{"Tenant.CustomerUpdated": True, "Tenant.ICustomerLifecycleEvent": True},
    )
    assert message.session_id is None
    _send_to_fallback(app, message)

    copies: list[Any] = []
    with (
        sdk_client_for(app.settings) as client,
        client.get_subscription_receiver(dedicated, watcher, max_wait_time=WAIT) as receiver,
    ):
        # Only this test's event: another test's CustomerUpdated may be bridged to the topic meanwhile.
        while not any(c.message_id == message.message_id for c in copies):
            batch = receiver.receive_messages(max_message_count=10, max_wait_time=WAIT)
            assert batch, "the bridged copy never arrived"
            for copy in batch:
                receiver.complete_message(copy)
            copies.extend(batch)
    [copy] = [c for c in copies if c.message_id == message.message_id]
    assert copy.session_id == customer


# ----------------------------------------------------------------------------------------------- provisioning


def test_the_same_put_twice_reports_unchanged_the_second_time(app: App) -> None:
    try:
        first = app.put("shipping", ["Billing.InvoiceIssued", "Tenant.CustomerDeleted"])
        second = app.put("shipping", ["Billing.InvoiceIssued", "Tenant.CustomerDeleted"])
    finally:
        app.put("shipping", [])  # the other tests rely on nobody handling invoices

    assert first.status_code == 201, first.text
    assert first.json()["outcome"] == "changed"
    assert second.status_code == 200, second.text
    assert second.json()["outcome"] == "unchanged"
    assert second.json()["result"]["created"] == second.json()["result"]["deleted"] == []


def test_a_put_deletes_what_the_endpoint_no_longer_subscribes_to(app: App) -> None:
    # A hosted endpoint's list may drop what its handlers do not handle (shipping handles only invoices:
    # dropping everything it handles is refused, tests/functions/test_handled_subscriptions.py); an endpoint
    # the app does not host may drop everything.
    topic, queue = app.settings["BUSBAR_FALLBACK_TOPIC"], app.settings["BUSBAR_SHIPPING_QUEUE"]
    partner = f"partner-{uuid.uuid4().hex[:8]}"
    app.put("shipping", ["Billing.InvoiceIssued", "Tenant.CustomerDeleted"])
    app.put(partner, ["Billing.InvoiceIssued", "Tenant.CustomerDeleted"])

    fewer = app.put("shipping", ["Billing.InvoiceIssued"])
    none = app.put(partner, [])

    assert fewer.status_code == 200, fewer.text
    assert fewer.json()["result"]["deleted"] == [
        f"{topic}/Subscriptions/{queue}/Rules/Tenant.CustomerDeleted"
    ]
    assert none.status_code == 200, none.text
    assert none.json()["result"]["deleted"] == [f"{topic}/Subscriptions/{partner}"]
    assert app.http.get(f"/api/endpoints/{partner}/subscriptions").json()["subscriptions"] == []


def test_concurrent_puts_for_different_endpoints_both_succeed(private_emulator: EmulatorThread) -> None:
    settings = app_settings(private_emulator)
    with (
        running_host(
            APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
        ) as host,
        httpx.Client(base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60) as http,
    ):

        def put(endpoint: str, events: list[str]) -> httpx.Response:
            return http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": events})

        with ThreadPoolExecutor(2) as pool:
            a = pool.submit(put, "billing", ["Shipping.OrderAccepted"])
            b = pool.submit(put, "crm", ["Shipping.IOrderStatusChanged", "Tenant.ICustomerLifecycleEvent"])
            responses = [a.result(), b.result()]
        listed = http.get("/api/endpoints/crm/subscriptions")

    assert [r.status_code for r in responses] == [201, 201], [r.text for r in responses]
    rules = {r["name"] for s in listed.json()["subscriptions"] for r in s["rules"]}
    assert {"Shipping.IOrderStatusChanged", "Tenant.ICustomerLifecycleEvent"} <= rules


def test_a_message_with_an_amqp_value_body_is_dead_lettered_not_retried(provisioned: App) -> None:
    message_id = fresh("value")
    message = AmqpAnnotatedMessage(
        value_body={"amount": 1},
        properties={"message_id": message_id},
        application_properties={ENCLOSED_MESSAGE_TYPES: "Shipping.OrderAccepted"},
    )
    queue = provisioned.settings["BUSBAR_BILLING_QUEUE"]
    with sdk_client_for(provisioned.settings) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(message)

    [dead] = _dead_letters(provisioned, queue, message_id)
    assert dead.dead_letter_reason == PAYLOAD_VALIDATION_FAILED
    assert "order_id: Field required" in (dead.dead_letter_error_description or "")
    assert dead.delivery_count == 0
