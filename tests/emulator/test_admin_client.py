"""ServiceBusAdministrationClient (sync) against the emulator's ATOM management API, over HTTPS, with every
result checked on the AMQP data plane where the property has an effect there."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote_plus
from xml.etree import ElementTree

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import (
    AccessRights,
    AuthorizationRule,
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from emulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, sign
from tests.emulator.admin_fixtures import AdminEmulator, admin_emulator, fresh, make_admin_emulator
from tests.emulator.arm_client import receive_queue, receive_subscription, send
from tests.emulator.sdk_helpers import app_properties

__all__ = ["admin_emulator", "make_admin_emulator"]  # fixtures used by name below


def test_namespace_properties_name_the_emulator_namespace(admin_emulator: AdminEmulator) -> None:
    with admin_emulator.admin() as admin:
        properties = admin.get_namespace_properties()
    assert properties.name == admin_emulator.emulator.namespace.name
    assert properties.messaging_sku == "Standard"
    assert properties.namespace_type == "Messaging"
    assert properties.created_at_utc is not None


def test_created_queue_reads_back_its_properties_and_the_broker_applies_them(
    admin_emulator: AdminEmulator,
) -> None:
    name = fresh("q")
    with admin_emulator.admin() as admin:
        created = admin.create_queue(
            name,
            lock_duration=timedelta(seconds=30),
            max_delivery_count=2,
            default_message_time_to_live=timedelta(hours=1),
            dead_lettering_on_message_expiration=True,
            requires_duplicate_detection=True,
            duplicate_detection_history_time_window=timedelta(minutes=2),
            max_size_in_megabytes=2048,
            user_metadata="orders",
        )
        fetched = admin.get_queue(name)
    for queue in (created, fetched):
        assert queue.name == name
        assert queue.lock_duration == timedelta(seconds=30)
        assert queue.max_delivery_count == 2
        assert queue.default_message_time_to_live == timedelta(hours=1)
        assert queue.dead_lettering_on_message_expiration is True
        assert queue.requires_duplicate_detection is True
        assert queue.duplicate_detection_history_time_window == timedelta(minutes=2)
        assert queue.max_size_in_megabytes == 2048
        assert queue.user_metadata == "orders"
        assert queue.status == "Active"
        assert queue.requires_session is False
    # MaxDeliveryCount 2 is live on the broker: two abandons dead-letter the message.
    send(admin_emulator.connection_string, name, ServiceBusMessage("once"))
    with (
        ServiceBusClient.from_connection_string(admin_emulator.connection_string) as client,
        client.get_queue_receiver(name, max_wait_time=5) as receiver,
    ):
        for _ in range(2):
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.abandon_message(message)
    (dead,) = receive_queue(
        admin_emulator.connection_string, name, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER
    )
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_queue_runtime_properties_count_messages_by_kind(admin_emulator: AdminEmulator) -> None:
    name = fresh("q")
    with admin_emulator.admin() as admin:
        admin.create_queue(name)
        with (
            ServiceBusClient.from_connection_string(admin_emulator.connection_string) as client,
            client.get_queue_sender(name) as sender,
        ):
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
            sender.schedule_messages(ServiceBusMessage("later"), datetime.now(UTC) + timedelta(hours=1))
            with client.get_queue_receiver(name, max_wait_time=5) as receiver:
                (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                receiver.dead_letter_message(first, reason="Testing")
        runtime = admin.get_queue_runtime_properties(name)
        listed = {q.name: q for q in admin.list_queues_runtime_properties()}
    assert runtime.active_message_count == 2
    assert runtime.dead_letter_message_count == 1
    assert runtime.scheduled_message_count == 1
    assert runtime.transfer_message_count == 0
    assert runtime.total_message_count == 4
    assert runtime.size_in_bytes is not None and runtime.size_in_bytes > 0
    assert runtime.created_at_utc is not None and runtime.updated_at_utc is not None
    assert listed[name].active_message_count == 2


def test_update_queue_changes_the_live_queue_and_keeps_its_messages(admin_emulator: AdminEmulator) -> None:
    name = fresh("q")
    with admin_emulator.admin() as admin:
        queue = admin.create_queue(name)
        send(admin_emulator.connection_string, name, ServiceBusMessage("kept"))
        queue.max_delivery_count = 7
        queue.status = "SendDisabled"
        admin.update_queue(queue)
        updated = admin.get_queue(name)
        admin.update_queue(updated, lock_duration=timedelta(seconds=45), status="Active")
        again = admin.get_queue(name)
    assert updated.max_delivery_count == 7 and updated.status == "SendDisabled"
    assert again.lock_duration == timedelta(seconds=45) and again.status == "Active"
    assert [str(m) for m in receive_queue(admin_emulator.connection_string, name, 1)] == ["kept"]


def test_update_of_a_queue_that_does_not_exist_is_not_found(admin_emulator: AdminEmulator) -> None:
    name = fresh("q")
    with admin_emulator.admin() as admin:
        queue = admin.create_queue(name)
        admin.delete_queue(name)
        with pytest.raises(ResourceNotFoundError):
            admin.update_queue(queue)


def test_creating_an_existing_entity_raises_resource_exists(admin_emulator: AdminEmulator) -> None:
    queue, topic = fresh("q"), fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_queue(queue)
        admin.create_topic(topic)
        admin.create_subscription(topic, "s")
        admin.create_rule(topic, "s", "r")
        with pytest.raises(ResourceExistsError):
            admin.create_queue(queue)
        with pytest.raises(ResourceExistsError):
            admin.create_topic(queue)  # one name space for queues and topics
        with pytest.raises(ResourceExistsError):
            admin.create_subscription(topic, "s")
        with pytest.raises(ResourceExistsError):
            admin.create_rule(topic, "s", "r")


def test_missing_entities_raise_resource_not_found(admin_emulator: AdminEmulator) -> None:
    missing, topic = fresh("missing"), fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "s")
        calls: list[Callable[[], object]] = [
            lambda: admin.get_queue(missing),
            lambda: admin.get_queue_runtime_properties(missing),
            lambda: admin.get_topic(missing),
            lambda: admin.get_topic_runtime_properties(missing),
            lambda: admin.delete_queue(missing),
            lambda: admin.delete_topic(missing),
            lambda: admin.get_subscription(topic, missing),
            lambda: admin.get_subscription_runtime_properties(topic, missing),
            lambda: admin.delete_subscription(topic, missing),
            lambda: list(admin.list_subscriptions(missing)),
            lambda: admin.get_rule(topic, "s", missing),
            lambda: admin.delete_rule(topic, "s", missing),
            lambda: list(admin.list_rules(topic, missing)),
            lambda: admin.create_subscription(missing, "s"),
        ]
        for call in calls:
            with pytest.raises(ResourceNotFoundError):
                call()


def test_listing_pages_through_more_than_one_page(admin_emulator: AdminEmulator) -> None:
    prefix = fresh("page")
    names = [f"{prefix}-{i:03d}" for i in range(130)]
    topic = fresh("t")
    with admin_emulator.admin() as admin:
        for name in names:
            admin.create_queue(name)
        admin.create_topic(topic)
        subscriptions = [f"s{i:03d}" for i in range(105)]
        for name in subscriptions:
            admin.create_subscription(topic, name)
        listed = [q.name for q in admin.list_queues() if q.name.startswith(prefix)]
        runtime = [q.name for q in admin.list_queues_runtime_properties() if q.name.startswith(prefix)]
        listed_subscriptions = [s.name for s in admin.list_subscriptions(topic)]
        listed_runtime = [s.name for s in admin.list_subscriptions_runtime_properties(topic)]
    assert listed == names  # in name order, every page, no repeats
    assert runtime == names
    assert listed_subscriptions == subscriptions
    assert listed_runtime == subscriptions


def test_invalid_properties_are_refused_with_azures_message(admin_emulator: AdminEmulator) -> None:
    with admin_emulator.admin() as admin:
        with pytest.raises(HttpResponseError) as refused:
            admin.create_queue(fresh("q"), lock_duration=timedelta(minutes=10))
        assert refused.value.status_code == 400
        assert "LockDuration" in str(refused.value) or "lock" in str(refused.value).lower()
        with pytest.raises(HttpResponseError) as bad_name:
            admin.create_queue("bad name!")
        assert bad_name.value.status_code == 400
        with pytest.raises(HttpResponseError) as no_target:
            admin.create_queue(fresh("q"), forward_to=fresh("nowhere"))
        assert no_target.value.status_code == 400
        assert "forwarding destination" in str(no_target.value)


def test_topic_lifecycle_and_runtime_counts(admin_emulator: AdminEmulator) -> None:
    topic = fresh("t")
    with admin_emulator.admin() as admin:
        created = admin.create_topic(
            topic,
            default_message_time_to_live=timedelta(minutes=30),
            requires_duplicate_detection=True,
            max_size_in_megabytes=1024,
            support_ordering=False,
        )
        admin.create_subscription(topic, "sql")
        admin.create_rule(topic, "sql", "extra", filter=SqlRuleFilter("amount > 10"))
        admin.create_subscription(topic, "corr")
        admin.delete_rule(topic, "corr", "$Default")
        admin.create_rule(topic, "corr", "c", filter=CorrelationRuleFilter(label="x"))
        created.default_message_time_to_live = timedelta(minutes=20)
        admin.update_topic(created)
        fetched = admin.get_topic(topic)
        runtime = admin.get_topic_runtime_properties(topic)
        listed = [t.name for t in admin.list_topics()]
        listed_runtime = {t.name: t for t in admin.list_topics_runtime_properties()}
        admin.delete_topic(topic)
        with pytest.raises(ResourceNotFoundError):
            admin.get_topic(topic)
    assert created.requires_duplicate_detection is True and created.support_ordering is False
    assert fetched.default_message_time_to_live == timedelta(minutes=20)
    assert runtime.subscription_count == 2
    assert runtime.sql_filter_count == 2  # sql's $Default (1=1) and its "amount > 10"
    assert runtime.correlation_filter_count == 1
    assert topic in listed
    assert listed_runtime[topic].subscription_count == 2


def test_subscription_with_forwarding_delivers_through_the_data_plane(admin_emulator: AdminEmulator) -> None:
    topic, target, dead_target = fresh("t"), fresh("q"), fresh("dlq")
    with admin_emulator.admin() as admin:
        admin.create_queue(target)
        admin.create_queue(dead_target)
        admin.create_topic(topic)
        created = admin.create_subscription(
            topic,
            "fwd",
            forward_to=target,
            forward_dead_lettered_messages_to=dead_target,
            max_delivery_count=3,
            lock_duration=timedelta(seconds=20),
        )
        fetched = admin.get_subscription(topic, "fwd")
        send(admin_emulator.connection_string, topic, ServiceBusMessage("routed"))
        assert [str(m) for m in receive_queue(admin_emulator.connection_string, target, 1)] == ["routed"]
        fetched.max_delivery_count = 5
        fetched.forward_to = None
        admin.update_subscription(topic, fetched)
        updated = admin.get_subscription(topic, "fwd")
        runtime = admin.get_subscription_runtime_properties(topic, "fwd")
        send(admin_emulator.connection_string, topic, ServiceBusMessage("kept"))
        received = receive_subscription(admin_emulator.connection_string, topic, "fwd", 1)
        admin.delete_subscription(topic, "fwd")
        with pytest.raises(ResourceNotFoundError):
            admin.get_subscription(topic, "fwd")
    # Azure reports forwarding targets as full addresses; the SDK compares by suffix.
    assert created.forward_to is not None and created.forward_to.endswith(f"/{target}")
    assert fetched.forward_dead_lettered_messages_to is not None
    assert fetched.forward_dead_lettered_messages_to.endswith(f"/{dead_target}")
    assert created.max_delivery_count == 3 and created.lock_duration == timedelta(seconds=20)
    assert updated.max_delivery_count == 5 and updated.forward_to is None
    assert runtime.active_message_count == 0
    assert [str(m) for m in received] == ["kept"]


def test_correlation_rule_created_through_the_api_routes_a_message(admin_emulator: AdminEmulator) -> None:
    topic = fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "orders")
        admin.delete_rule(topic, "orders", "$Default")
        rule = admin.create_rule(
            topic,
            "orders",
            "placed",
            filter=CorrelationRuleFilter(
                label="OrderPlaced", properties={"region": "eu", "priority": 2, "vip": True}
            ),
            action=SqlRuleAction("SET routed = 'yes'"),
        )
        fetched = admin.get_rule(topic, "orders", "placed")
    assert isinstance(fetched.filter, CorrelationRuleFilter)
    assert fetched.filter.label == "OrderPlaced"
    assert fetched.filter.properties is not None
    assert dict(fetched.filter.properties) == {"region": "eu", "priority": 2, "vip": True}
    assert isinstance(fetched.action, SqlRuleAction) and fetched.action.sql_expression == "SET routed = 'yes'"
    assert rule.name == "placed"
    send(
        admin_emulator.connection_string,
        topic,
        ServiceBusMessage(
            "match",
            subject="OrderPlaced",
            application_properties={"region": "eu", "priority": 2, "vip": True},
        ),
        ServiceBusMessage(
            "other region",
            subject="OrderPlaced",
            application_properties={"region": "us", "priority": 2, "vip": True},
        ),
    )
    (routed,) = receive_subscription(admin_emulator.connection_string, topic, "orders", 1)
    assert str(routed) == "match"
    assert app_properties(routed)["routed"] == "yes"
    assert receive_subscription(admin_emulator.connection_string, topic, "orders") == []


def test_sql_true_and_false_rules_round_trip_and_update(admin_emulator: AdminEmulator) -> None:
    topic = fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "s")
        admin.create_rule(topic, "s", "sql", filter=SqlRuleFilter("amount > 10 AND region = 'eu'"))
        admin.create_rule(topic, "s", "none", filter=FalseRuleFilter())
        rules = {r.name: r for r in admin.list_rules(topic, "s")}
        sql = admin.get_rule(topic, "s", "sql")
        sql.filter = SqlRuleFilter("amount > 100")
        admin.update_rule(topic, "s", sql)
        updated = admin.get_rule(topic, "s", "sql")
        admin.delete_rule(topic, "s", "$Default")
        send(
            admin_emulator.connection_string,
            topic,
            ServiceBusMessage("small", application_properties={"amount": 50}),
            ServiceBusMessage("big", application_properties={"amount": 500}),
        )
        received = receive_subscription(admin_emulator.connection_string, topic, "s", 1)
    assert isinstance(rules["$Default"].filter, TrueRuleFilter)
    assert isinstance(rules["none"].filter, FalseRuleFilter)
    assert isinstance(rules["sql"].filter, SqlRuleFilter)
    assert rules["sql"].filter.sql_expression == "amount > 10 AND region = 'eu'"
    assert isinstance(updated.filter, SqlRuleFilter) and updated.filter.sql_expression == "amount > 100"
    assert [str(m) for m in received] == ["big"]


def test_rules_the_broker_cannot_run_are_refused_precisely(admin_emulator: AdminEmulator) -> None:
    topic = fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "s")
        with pytest.raises(HttpResponseError) as syntax:
            admin.create_rule(topic, "s", "broken", filter=SqlRuleFilter("amount >"))
        with pytest.raises(HttpResponseError) as parameters:
            admin.create_rule(topic, "s", "params", filter=SqlRuleFilter("a = @p", parameters={"@q": 1}))
        names = [r.name for r in admin.list_rules(topic, "s")]
    assert syntax.value.status_code == 400 and "broken" in str(syntax.value)
    assert parameters.value.status_code == 400 and "@p" in str(parameters.value)
    assert names == ["$Default"]  # nothing half-created


def test_authorization_rules_round_trip(admin_emulator: AdminEmulator) -> None:
    name = fresh("q")
    rule = AuthorizationRule(
        type="SharedAccessAuthorizationRule",
        key_name="listen-only",
        primary_key="cHJpbWFyeQ==",
        secondary_key="c2Vjb25kYXJ5",
        rights=[AccessRights.LISTEN],
    )
    with admin_emulator.admin() as admin:
        admin.create_queue(name, authorization_rules=[rule])
        fetched = admin.get_queue(name)
    assert fetched.authorization_rules is not None
    (back,) = fetched.authorization_rules
    assert back.key_name == "listen-only"
    assert back.primary_key == "cHJpbWFyeQ=="
    assert back.rights == ["Listen"]


def test_wrong_key_is_refused_with_client_authentication_error(admin_emulator: AdminEmulator) -> None:
    wrong = admin_emulator.admin_connection_string.replace(
        "SharedAccessKey=SAS_KEY_VALUE", "SharedAccessKey=nope"
    )
    with ServiceBusAdministrationClient.from_connection_string(
        wrong, connection_verify=admin_emulator.ca_file, retry_total=0
    ) as admin:
        with pytest.raises(ClientAuthenticationError):
            admin.get_namespace_properties()
        with pytest.raises(ClientAuthenticationError):
            admin.create_queue(fresh("q"))


def test_token_for_another_entity_is_refused(admin_emulator: AdminEmulator) -> None:
    allowed, other = fresh("q"), fresh("q")
    with admin_emulator.admin() as admin:
        admin.create_queue(allowed)
        admin.create_queue(other)
    host = admin_emulator.admin_connection_string.split("sb://", 1)[1].split(";", 1)[0]
    resource = quote_plus(f"https://{host}/{allowed}")
    expiry = int(time.time()) + 3600
    signature = quote_plus(sign(resource, expiry, DEFAULT_KEY))
    token = f"SharedAccessSignature sr={resource}&sig={signature}&se={expiry}&skn={DEFAULT_KEY_NAME}"
    scoped = f"Endpoint=sb://{host};SharedAccessSignature={token};UseDevelopmentEmulator=true"
    with ServiceBusAdministrationClient.from_connection_string(
        scoped, connection_verify=admin_emulator.ca_file, retry_total=0
    ) as admin:
        assert admin.get_queue(allowed).name == allowed
        with pytest.raises(ClientAuthenticationError):
            admin.get_queue(other)


def test_one_entity_store_for_admin_api_arm_and_restart(
    make_admin_emulator: Callable[[Path | None], AdminEmulator], tmp_path: Path
) -> None:
    from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties

    from tests.emulator.arm_client import arm

    data_dir = tmp_path / "data"
    first = make_admin_emulator(data_dir)
    queue, topic = fresh("q"), fresh("t")
    with first.admin() as admin:
        admin.create_queue(queue, max_delivery_count=4)
        admin.create_topic(topic)
        admin.create_subscription(topic, "s", forward_to=queue)
    client = arm(first.emulator.management_port, first.emulator.management_token)
    try:
        assert client.queues.get(*client.scope, queue).max_delivery_count == 4
        client.queues.create_or_update(
            *client.scope, "from-arm", SBQueue(properties=SBQueueProperties(max_delivery_count=6))
        )
    finally:
        client.close()
    with first.admin() as admin:
        assert admin.get_queue("from-arm").max_delivery_count == 6
    send(first.connection_string, queue, ServiceBusMessage("durable"))
    first.thread.stop()

    second = make_admin_emulator(data_dir)
    with second.admin() as admin:
        assert admin.get_queue(queue).max_delivery_count == 4
        forward_to = admin.get_subscription(topic, "s").forward_to
        assert forward_to is not None and forward_to.endswith(f"/{queue}")
        assert admin.get_queue_runtime_properties(queue).active_message_count == 1


def _token(host: str) -> str:
    resource = quote_plus(f"https://{host}")
    expiry = int(time.time()) + 3600
    signature = quote_plus(sign(resource, expiry, DEFAULT_KEY))
    return f"SharedAccessSignature sr={resource}&sig={signature}&se={expiry}&skn={DEFAULT_KEY_NAME}"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<entry><content>", "not well-formed XML"),
        (b"<feed/>", "must be an ATOM <entry>"),
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content/></entry>',
            "must hold a <QueueDescription> or <TopicDescription>",
        ),
        (
            b'<!DOCTYPE x [<!ENTITY a "aaaa">]><entry xmlns="http://www.w3.org/2005/Atom"/>',
            "document type declarations are not allowed",
        ),
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
            b'<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
            b"<MaxDeliveryCount>many</MaxDeliveryCount></QueueDescription></content></entry>",
            "<MaxDeliveryCount> must be an integer",
        ),
    ],
)
def test_malformed_bodies_get_a_precise_400_and_create_nothing(
    admin_emulator: AdminEmulator, body: bytes, detail: str
) -> None:
    import requests

    host = admin_emulator.admin_connection_string.split("sb://", 1)[1].split(";", 1)[0]
    name = fresh("q")
    response = requests.put(
        f"https://{host}/{name}?api-version=2021-05",
        data=body,
        headers={"Authorization": _token(host), "Content-Type": "application/atom+xml"},
        verify=admin_emulator.ca_file,
        timeout=10,
    )
    assert response.status_code == 400
    error = ElementTree.fromstring(response.content)
    assert error.tag == "Error" and error.findtext("Code") == "400"
    assert detail in (error.findtext("Detail") or "")
    with admin_emulator.admin() as admin:
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue(name)
        assert admin.get_namespace_properties().name  # still serving
