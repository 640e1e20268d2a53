"""Behaviour specs for the ARM management plane: create, read, list, update and delete queues, topics,
subscriptions and rules with the unmodified azure-mgmt-servicebus client, and prove with the data-plane
SDK (azure-servicebus) that every change is live on the broker at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus.models import (
    Action,
    CorrelationFilter,
    Rule,
    Ruleproperties,
    SBQueue,
    SBQueueProperties,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
    SBTopicProperties,
    SqlFilter,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import (
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
)

from tests.emulator.arm_client import (
    Arm,
    arm,
    receive_queue,
    receive_subscription,
    refusal,
    send,
    unique,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle


@pytest.fixture
def api(emulator: EmulatorHandle) -> Iterator[Arm]:
    client = arm(emulator.management_port, emulator.emulator.management_token)
    yield client
    client.close()


def _topic_with_subscription(api: Arm, *, default_rule: bool = False) -> tuple[str, str]:
    """A fresh topic and subscription; without ``default_rule`` the subscription has no rules at all."""
    topic, subscription = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(*api.scope, topic, subscription, SBSubscription())
    if not default_rule:
        api.rules.delete(*api.scope, topic, subscription, "$Default")
    return topic, subscription


def _labels(messages: Sequence[object]) -> list[str]:
    return sorted(str(m) for m in messages)


# ---------------------------------------------------------------------------------------------- namespace


def test_get_namespace_reports_the_configured_namespace(api: Arm, emulator: EmulatorHandle) -> None:
    namespace = api.namespaces.get(*api.scope)

    assert namespace.name == "sbemulatorns"
    assert namespace.type == "Microsoft.ServiceBus/Namespaces"
    assert namespace.id == (
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/busbar-tests"
        "/providers/Microsoft.ServiceBus/namespaces/sbemulatorns"
    )
    assert namespace.sku is not None and namespace.sku.name == "Standard"
    assert namespace.properties is not None
    assert namespace.properties.provisioning_state == "Succeeded"
    assert namespace.properties.status == "Active"
    assert namespace.properties.service_bus_endpoint == f"sb://localhost:{emulator.amqp_port}/"
    assert [n.name for n in api.namespaces.list_by_resource_group(api.resource_group)] == ["sbemulatorns"]
    assert [n.name for n in api.namespaces.list()] == ["sbemulatorns"]


# ---------------------------------------------------------------------------------------------- queues


def test_queue_create_read_update_delete_is_live_on_the_broker(api: Arm, emulator: EmulatorHandle) -> None:
    name = unique("q")
    before = datetime.now(UTC) - timedelta(seconds=1)

    created = api.queues.create_or_update(
        *api.scope,
        name,
        SBQueue(
            properties=SBQueueProperties(
                lock_duration=timedelta(seconds=30),
                max_delivery_count=3,
                dead_lettering_on_message_expiration=True,
                default_message_time_to_live=timedelta(hours=1),
                user_metadata="orders",
            ),
        ),
    )

    assert created.name == name
    assert created.type == "Microsoft.ServiceBus/Namespaces/Queues"
    assert created.id is not None and created.id.endswith(f"/namespaces/sbemulatorns/queues/{name}")
    assert created.lock_duration == timedelta(seconds=30)
    assert created.max_delivery_count == 3
    assert created.default_message_time_to_live == timedelta(hours=1)
    assert created.dead_lettering_on_message_expiration is True
    assert created.requires_session is False
    assert created.status == "Active"
    assert created.user_metadata == "orders"
    assert created.created_at is not None and created.created_at >= before
    send(emulator.connection_string, name, ServiceBusMessage("hello"))
    assert _labels(receive_queue(emulator.connection_string, name, 1)) == ["hello"]

    fetched = api.queues.get(*api.scope, name)
    assert fetched.as_dict() | {"properties": None} == created.as_dict() | {"properties": None}
    assert name in [q.name for q in api.queues.list_by_namespace(*api.scope)]

    updated = api.queues.create_or_update(
        *api.scope,
        name,
        SBQueue(properties=SBQueueProperties(lock_duration=timedelta(seconds=45), status="SendDisabled")),
    )
    assert updated.lock_duration == timedelta(seconds=45)
    assert updated.max_delivery_count == 10  # a PUT replaces the definition: omitted means default
    assert updated.status == "SendDisabled"
    assert updated.created_at == created.created_at
    assert updated.updated_at is not None and created.updated_at is not None
    assert updated.updated_at >= created.updated_at
    with pytest.raises(MessagingEntityDisabledError):
        send(emulator.connection_string, name, ServiceBusMessage("refused"))

    api.queues.delete(*api.scope, name)

    assert refusal(lambda: api.queues.get(*api.scope, name)).status_code == 404
    with pytest.raises(ServiceBusAuthenticationError):  # a deleted entity's token is refused (404)
        send(emulator.connection_string, name, ServiceBusMessage("gone"))
    api.queues.delete(*api.scope, name)  # deleting what is not there succeeds (204)


def test_queue_count_details_follow_the_messages(api: Arm, emulator: EmulatorHandle) -> None:
    name = unique("q")
    api.queues.create_or_update(*api.scope, name, SBQueue())
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(name) as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c")])
            sender.schedule_messages(ServiceBusMessage("later"), datetime.now(UTC) + timedelta(hours=1))
        with client.get_queue_receiver(name, max_wait_time=1) as receiver:
            (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.dead_letter_message(first, reason="test")

    queue = api.queues.get(*api.scope, name)

    assert queue.count_details is not None
    assert queue.count_details.active_message_count == 2
    assert queue.count_details.dead_letter_message_count == 1
    assert queue.count_details.scheduled_message_count == 1
    assert queue.count_details.transfer_message_count == 0
    assert queue.count_details.transfer_dead_letter_message_count == 0
    assert queue.message_count == 4
    assert queue.size_in_bytes is not None and queue.size_in_bytes > 0


def test_list_queues_pages_with_next_link(api: Arm) -> None:
    names = sorted(unique("paged") for _ in range(5))
    for name in names:
        api.queues.create_or_update(*api.scope, name, SBQueue())

    pages = [list(page) for page in api.queues.list_by_namespace(*api.scope, top=2).by_page()]

    assert len(pages) >= 3
    assert all(len(page) <= 2 for page in pages)
    listed = [q.name for page in pages for q in page]
    assert len(listed) == len(set(listed))
    assert [n for n in listed if n in names] == names
    assert listed == sorted(listed, key=str.lower)


# ---------------------------------------------------------------------------------------------- topics


def test_topic_create_read_list_update_delete(api: Arm, emulator: EmulatorHandle) -> None:
    name = unique("t")

    created = api.topics.create_or_update(
        *api.scope,
        name,
        SBTopic(
            properties=SBTopicProperties(
                max_size_in_megabytes=2048, default_message_time_to_live=timedelta(days=1)
            )
        ),
    )

    assert created.name == name
    assert created.type == "Microsoft.ServiceBus/Namespaces/Topics"
    assert created.max_size_in_megabytes == 2048
    assert created.default_message_time_to_live == timedelta(days=1)
    assert created.subscription_count == 0
    assert api.topics.get(*api.scope, name).max_size_in_megabytes == 2048
    assert name in [t.name for t in api.topics.list_by_namespace(*api.scope)]
    send(emulator.connection_string, name, ServiceBusMessage("dropped: no subscriptions yet"))

    api.subscriptions.create_or_update(*api.scope, name, "audit", SBSubscription())
    updated = api.topics.create_or_update(
        *api.scope, name, SBTopic(properties=SBTopicProperties(status="SendDisabled"))
    )

    assert updated.status == "SendDisabled"
    assert updated.max_size_in_megabytes == 1024
    assert updated.subscription_count == 1
    with pytest.raises(MessagingEntityDisabledError):
        send(emulator.connection_string, name, ServiceBusMessage("refused"))

    api.topics.delete(*api.scope, name)

    assert refusal(lambda: api.topics.get(*api.scope, name)).status_code == 404
    assert refusal(lambda: api.subscriptions.get(*api.scope, name, "audit")).status_code == 404
    with pytest.raises(ServiceBusAuthenticationError):  # a deleted entity's token is refused (404)
        send(emulator.connection_string, name, ServiceBusMessage("gone"))


# ---------------------------------------------------------------------------------------------- subscriptions


def test_subscription_create_read_list_update_delete_is_live(api: Arm, emulator: EmulatorHandle) -> None:
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    created = api.subscriptions.create_or_update(
        *api.scope,
        topic,
        name,
        SBSubscription(
            properties=SBSubscriptionProperties(max_delivery_count=4, lock_duration=timedelta(seconds=20))
        ),
    )

    assert created.name == name
    assert created.type == "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions"
    assert created.id is not None and created.id.endswith(f"/topics/{topic}/subscriptions/{name}")
    assert created.max_delivery_count == 4
    assert created.lock_duration == timedelta(seconds=20)
    assert created.dead_lettering_on_filter_evaluation_exceptions is True
    assert [r.name for r in api.rules.list_by_subscriptions(*api.scope, topic, name)] == ["$Default"]
    send(emulator.connection_string, topic, ServiceBusMessage("to everyone"))
    assert _labels(receive_subscription(emulator.connection_string, topic, name, 1)) == ["to everyone"]
    assert [s.name for s in api.subscriptions.list_by_topic(*api.scope, topic)] == [name]

    send(emulator.connection_string, topic, ServiceBusMessage("waiting"))
    updated = api.subscriptions.create_or_update(
        *api.scope,
        topic,
        name,
        SBSubscription(properties=SBSubscriptionProperties(max_delivery_count=7, status="ReceiveDisabled")),
    )
    assert updated.max_delivery_count == 7
    assert updated.status == "ReceiveDisabled"
    assert updated.count_details is not None and updated.count_details.active_message_count == 1
    assert updated.message_count == 1

    api.subscriptions.delete(*api.scope, topic, name)

    assert refusal(lambda: api.subscriptions.get(*api.scope, topic, name)).status_code == 404
    with pytest.raises(ServiceBusAuthenticationError):  # a deleted entity's token is refused (404)
        receive_subscription(emulator.connection_string, topic, name)


def test_subscription_created_with_forward_to_forwards(api: Arm, emulator: EmulatorHandle) -> None:
    topic, subscription, destination = unique("t"), unique("s"), unique("q")
    api.queues.create_or_update(*api.scope, destination, SBQueue())
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    created = api.subscriptions.create_or_update(
        *api.scope,
        topic,
        subscription,
        SBSubscription(properties=SBSubscriptionProperties(forward_to=destination)),
    )

    assert created.forward_to == destination
    send(emulator.connection_string, topic, ServiceBusMessage("forwarded"))
    assert _labels(receive_queue(emulator.connection_string, destination, 1)) == ["forwarded"]
    assert api.subscriptions.get(*api.scope, topic, subscription).message_count == 0


def test_forwarding_set_by_update_and_removed_by_update(api: Arm, emulator: EmulatorHandle) -> None:
    source, destination = unique("q"), unique("q")
    api.queues.create_or_update(*api.scope, destination, SBQueue())
    api.queues.create_or_update(*api.scope, source, SBQueue())

    api.queues.create_or_update(
        *api.scope, source, SBQueue(properties=SBQueueProperties(forward_to=destination))
    )
    send(emulator.connection_string, source, ServiceBusMessage("via forward"))
    assert _labels(receive_queue(emulator.connection_string, destination, 1)) == ["via forward"]

    api.queues.create_or_update(*api.scope, source, SBQueue())
    send(emulator.connection_string, source, ServiceBusMessage("kept"))
    assert _labels(receive_queue(emulator.connection_string, source, 1)) == ["kept"]


def test_forward_dead_lettered_messages_to(api: Arm, emulator: EmulatorHandle) -> None:
    source, parking = unique("q"), unique("q")
    api.queues.create_or_update(*api.scope, parking, SBQueue())
    api.queues.create_or_update(
        *api.scope, source, SBQueue(properties=SBQueueProperties(forward_dead_lettered_messages_to=parking))
    )
    send(emulator.connection_string, source, ServiceBusMessage("poison"))
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(source) as receiver,
    ):
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="bad")

    assert _labels(receive_queue(emulator.connection_string, parking, 1)) == ["poison"]


# ---------------------------------------------------------------------------------------------- rules


def test_sql_rule_created_over_arm_filters_immediately(api: Arm, emulator: EmulatorHandle) -> None:
    topic, subscription = _topic_with_subscription(api)

    rule = api.rules.create_or_update(
        *api.scope,
        topic,
        subscription,
        "red-only",
        Rule(
            properties=Ruleproperties(
                filter_type="SqlFilter", sql_filter=SqlFilter(sql_expression="color = 'red'")
            )
        ),
    )

    assert rule.name == "red-only"
    assert rule.type == "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions/Rules"
    assert rule.filter_type == "SqlFilter"
    assert rule.sql_filter is not None and rule.sql_filter.sql_expression == "color = 'red'"
    send(
        emulator.connection_string,
        topic,
        ServiceBusMessage("red", application_properties={"color": "red"}),
        ServiceBusMessage("blue", application_properties={"color": "blue"}),
    )
    assert _labels(receive_subscription(emulator.connection_string, topic, subscription)) == ["red"]

    api.rules.create_or_update(
        *api.scope,
        topic,
        subscription,
        "red-only",
        Rule(
            properties=Ruleproperties(
                filter_type="SqlFilter", sql_filter=SqlFilter(sql_expression="color = 'blue'")
            )
        ),
    )
    send(
        emulator.connection_string,
        topic,
        ServiceBusMessage("red", application_properties={"color": "red"}),
        ServiceBusMessage("blue", application_properties={"color": "blue"}),
    )
    assert _labels(receive_subscription(emulator.connection_string, topic, subscription)) == ["blue"]
    fetched = api.rules.get(*api.scope, topic, subscription, "red-only")
    assert fetched.sql_filter is not None and fetched.sql_filter.sql_expression == "color = 'blue'"

    api.rules.delete(*api.scope, topic, subscription, "red-only")

    assert list(api.rules.list_by_subscriptions(*api.scope, topic, subscription)) == []
    send(
        emulator.connection_string, topic, ServiceBusMessage("blue", application_properties={"color": "blue"})
    )
    assert receive_subscription(emulator.connection_string, topic, subscription) == []
    assert refusal(lambda: api.rules.get(*api.scope, topic, subscription, "red-only")).status_code == 404


def test_correlation_rule_round_trips_and_filters(api: Arm, emulator: EmulatorHandle) -> None:
    topic, subscription = _topic_with_subscription(api)

    api.rules.create_or_update(
        *api.scope,
        topic,
        subscription,
        "orders",
        Rule(
            properties=Ruleproperties(
                filter_type="CorrelationFilter",
                correlation_filter=CorrelationFilter(
                    label="OrderPlaced", content_type="application/json", properties={"region": "eu"}
                ),
            ),
        ),
    )

    rule = api.rules.get(*api.scope, topic, subscription, "orders")
    assert rule.filter_type == "CorrelationFilter"
    assert rule.correlation_filter is not None
    assert rule.correlation_filter.label == "OrderPlaced"
    assert rule.correlation_filter.content_type == "application/json"
    assert rule.correlation_filter.properties == {"region": "eu"}
    assert rule.correlation_filter.correlation_id is None
    send(
        emulator.connection_string,
        topic,
        ServiceBusMessage(
            "match",
            subject="OrderPlaced",
            content_type="application/json",
            application_properties={"region": "eu"},
        ),
        ServiceBusMessage(
            "wrong region",
            subject="OrderPlaced",
            content_type="application/json",
            application_properties={"region": "us"},
        ),
        ServiceBusMessage("wrong label", subject="OrderShipped", content_type="application/json"),
    )
    assert _labels(receive_subscription(emulator.connection_string, topic, subscription)) == ["match"]


def test_rule_action_applies_to_matching_messages(api: Arm, emulator: EmulatorHandle) -> None:
    topic, subscription = _topic_with_subscription(api)

    rule = api.rules.create_or_update(
        *api.scope,
        topic,
        subscription,
        "stamp",
        Rule(
            properties=Ruleproperties(
                filter_type="SqlFilter",
                sql_filter=SqlFilter(sql_expression="1=1"),
                action=Action(sql_expression="SET stamped = 'yes'"),
            ),
        ),
    )

    assert rule.action is not None and rule.action.sql_expression == "SET stamped = 'yes'"
    send(emulator.connection_string, topic, ServiceBusMessage("plain"))
    (received,) = receive_subscription(emulator.connection_string, topic, subscription, 1)
    assert received.application_properties is not None
    assert received.application_properties[b"stamped"] == b"yes"


def test_default_rule_is_a_true_sql_filter(api: Arm) -> None:
    topic, subscription = _topic_with_subscription(api, default_rule=True)

    (rule,) = api.rules.list_by_subscriptions(*api.scope, topic, subscription)

    assert rule.name == "$Default"
    assert rule.filter_type == "SqlFilter"
    assert rule.sql_filter is not None and rule.sql_filter.sql_expression == "1=1"


def test_rules_of_a_missing_subscription_are_not_found(api: Arm) -> None:
    topic = unique("t")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    with pytest.raises(ResourceNotFoundError):
        list(api.rules.list_by_subscriptions(*api.scope, topic, "missing"))
    refused = refusal(
        lambda: api.rules.create_or_update(
            *api.scope, topic, "missing", "r", Rule(properties=Ruleproperties(filter_type="SqlFilter"))
        )
    )
    assert refused.status_code == 404
    assert refused.error is not None and refused.error.code == "NotFound"


def test_dead_letter_counts_of_a_subscription(api: Arm, emulator: EmulatorHandle) -> None:
    topic, subscription = _topic_with_subscription(api, default_rule=True)
    send(emulator.connection_string, topic, ServiceBusMessage("one"), ServiceBusMessage("two"))
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_subscription_receiver(topic, subscription) as receiver,
    ):
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="test")

    fetched = api.subscriptions.get(*api.scope, topic, subscription)

    assert fetched.count_details is not None
    assert fetched.count_details.active_message_count == 1
    assert fetched.count_details.dead_letter_message_count == 1
    dead = receive_subscription(
        emulator.connection_string, topic, subscription, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER
    )
    assert len(dead) == 1


def test_a_receiver_attached_to_a_queue_deleted_through_arm_is_detached_with_not_found(
    api: Arm, emulator: EmulatorHandle
) -> None:
    """Azure closes a deleted entity's links with amqp:not-found, which the SDK raises as
    MessagingEntityNotFoundError; the emulator used to leave them attached, receiving nothing, forever."""
    name = unique("q")
    api.queues.create_or_update(*api.scope, name, SBQueue())
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client,
        client.get_queue_receiver(name) as receiver,
    ):
        assert receiver.receive_messages(max_message_count=1, max_wait_time=0.5) == []  # attached
        api.queues.delete(*api.scope, name)
        with pytest.raises(MessagingEntityNotFoundError, match="could not be found"):
            receiver.receive_messages(max_message_count=1, max_wait_time=5)
