"""Behaviour specs for ARM validation: every refused request answers with Azure's status code and ARM
error body (``{"error": {"code", "message"}}``) and changes nothing on the broker.

Service Bus reports these through ARM as 400 ``MessagingGatewayBadRequest`` with a ``SubCode`` in the
message (40000 invalid, 40300 quota, 40400 forwarding destination missing).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.core.exceptions import HttpResponseError
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
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from emulator.broker import namespace as broker_namespace
from tests.emulator.arm_client import Arm, arm, receive_queue, receive_subscription, refusal, send, unique

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

BAD_REQUEST = "MessagingGatewayBadRequest"


@pytest.fixture
def api(emulator: EmulatorHandle) -> Iterator[Arm]:
    client = arm(emulator.management_port, emulator.emulator.management_token)
    yield client
    client.close()


def _refused(call: Callable[[], object], status: int = 400, code: str = BAD_REQUEST) -> str:
    """Assert ``call`` is refused with ``status`` and ARM error ``code``; return the error message."""
    error = refusal(call)
    assert error.status_code == status, error.message
    assert error.error is not None
    assert error.error.code == code, error.message
    assert error.error.message
    return error.error.message


def _missing(call: Callable[[], object]) -> None:
    _refused(call, 404, "NotFound")


# ---------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name",
    [
        "q" * 261,  # longer than 260 characters
        "bad name",  # space
        "bad*name",  # character outside letters, digits, . - _ /
        "-starts-with-hyphen",
        "ends-with-dot.",
    ],
)
def test_invalid_queue_and_topic_names_are_refused(api: Arm, name: str) -> None:
    message = _refused(lambda: api.queues.create_or_update(*api.scope, name, SBQueue()))
    assert "SubCode=40000" in message
    _refused(lambda: api.topics.create_or_update(*api.scope, name, SBTopic()))

    _missing(lambda: api.queues.get(*api.scope, name))
    _missing(lambda: api.topics.get(*api.scope, name))


def test_queue_name_of_260_characters_is_accepted(api: Arm) -> None:
    name = unique("q").ljust(260, "x")

    assert api.queues.create_or_update(*api.scope, name, SBQueue()).name == name


@pytest.mark.parametrize("name", ["s" * 51, "bad*name", "has space", "_leading-underscore"])
def test_invalid_subscription_and_rule_names_are_refused(api: Arm, name: str) -> None:
    topic, subscription = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(*api.scope, topic, subscription, SBSubscription())

    _refused(lambda: api.subscriptions.create_or_update(*api.scope, topic, name, SBSubscription()))
    _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            name,
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="1=1"))),
        )
    )

    assert [s.name for s in api.subscriptions.list_by_topic(*api.scope, topic)] == [subscription]
    assert [r.name for r in api.rules.list_by_subscriptions(*api.scope, topic, subscription)] == ["$Default"]


def test_subscription_and_rule_names_of_50_characters_are_accepted(api: Arm) -> None:
    topic = unique("t")
    name = unique("s").ljust(50, "x")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    assert api.subscriptions.create_or_update(*api.scope, topic, name, SBSubscription()).name == name
    rule = api.rules.create_or_update(
        *api.scope,
        topic,
        name,
        name,
        Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="1=1"))),
    )
    assert rule.name == name


def test_subscription_of_a_missing_topic_is_not_found(api: Arm) -> None:
    topic = unique("missing")

    _missing(lambda: api.subscriptions.create_or_update(*api.scope, topic, "s", SBSubscription()))
    _missing(lambda: list(api.subscriptions.list_by_topic(*api.scope, topic)))

    _missing(lambda: api.topics.get(*api.scope, topic))


def test_queue_and_topic_names_share_one_namespace(api: Arm) -> None:
    topic, queue = unique("t"), unique("q")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.queues.create_or_update(*api.scope, queue, SBQueue())

    _refused(lambda: api.queues.create_or_update(*api.scope, topic.upper(), SBQueue()), 409, "Conflict")
    _refused(lambda: api.topics.create_or_update(*api.scope, queue, SBTopic()), 409, "Conflict")

    _missing(lambda: api.queues.get(*api.scope, topic))
    _missing(lambda: api.topics.get(*api.scope, queue))


# ---------------------------------------------------------------------------------------------- ranges


@pytest.mark.parametrize(
    ("properties", "mentions"),
    [
        ({"lock_duration": timedelta(minutes=6)}, "LockDuration"),
        ({"lock_duration": timedelta(seconds=1)}, "LockDuration"),
        ({"max_delivery_count": 0}, "MaxDeliveryCount"),
        ({"default_message_time_to_live": timedelta(milliseconds=500)}, "DefaultMessageTimeToLive"),
        (
            {"duplicate_detection_history_time_window": timedelta(days=8)},
            "DuplicateDetectionHistoryTimeWindow",
        ),
        ({"auto_delete_on_idle": timedelta(minutes=1)}, "AutoDeleteOnIdle"),
        ({"max_size_in_megabytes": 0}, "MaxSizeInMegabytes"),
        ({"max_message_size_in_kilobytes": 102401}, "MaxMessageSizeInKilobytes"),
        ({"user_metadata": "x" * 1025}, "UserMetadata"),
        ({"status": "Restoring"}, "status"),
    ],
)
def test_out_of_range_queue_properties_are_refused_and_change_nothing(
    api: Arm, properties: dict[str, Any], mentions: str
) -> None:
    existing, fresh = unique("q"), unique("q")
    api.queues.create_or_update(
        *api.scope, existing, SBQueue(properties=SBQueueProperties(max_delivery_count=5))
    )

    assert mentions in _refused(
        lambda: api.queues.create_or_update(
            *api.scope, fresh, SBQueue(properties=SBQueueProperties(**properties))
        )
    )
    _refused(
        lambda: api.queues.create_or_update(
            *api.scope,
            existing,
            SBQueue(properties=SBQueueProperties(**({"max_delivery_count": 6} | properties))),
        )
    )

    _missing(lambda: api.queues.get(*api.scope, fresh))
    assert api.queues.get(*api.scope, existing).max_delivery_count == 5


@pytest.mark.parametrize(
    "properties",
    [
        {"max_message_size_in_kilobytes": 0},
        {"duplicate_detection_history_time_window": timedelta(seconds=10)},
        {"status": "ReceiveDisabled"},  # a topic is never received from
    ],
)
def test_out_of_range_topic_properties_are_refused(api: Arm, properties: dict[str, Any]) -> None:
    name = unique("t")

    _refused(
        lambda: api.topics.create_or_update(
            *api.scope, name, SBTopic(properties=SBTopicProperties(**properties))
        )
    )

    _missing(lambda: api.topics.get(*api.scope, name))


@pytest.mark.parametrize(
    "properties",
    [
        {"lock_duration": timedelta(minutes=10)},
        {"max_delivery_count": 0},
        {"status": "SendDisabled"},  # a subscription is never sent to
    ],
)
def test_out_of_range_subscription_properties_are_refused(api: Arm, properties: dict[str, Any]) -> None:
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    _refused(
        lambda: api.subscriptions.create_or_update(
            *api.scope, topic, name, SBSubscription(properties=SBSubscriptionProperties(**properties))
        )
    )

    _missing(lambda: api.subscriptions.get(*api.scope, topic, name))


def test_malformed_bodies_are_invalid_request_content(api: Arm) -> None:
    name = unique("q")

    _refused(
        lambda: api.queues.create_or_update(*api.scope, name, io.BytesIO(b"{not json")),
        code="InvalidRequestContent",
    )
    _refused(
        lambda: api.queues.create_or_update(
            *api.scope, name, io.BytesIO(b'{"properties": {"maxDeliveryCount": "ten"}}')
        ),
        code="InvalidRequestContent",
    )
    _refused(
        lambda: api.queues.create_or_update(
            *api.scope, name, io.BytesIO(b'{"properties": {"lockDuration": "soon"}}')
        ),
        code="InvalidRequestContent",
    )

    _missing(lambda: api.queues.get(*api.scope, name))


# ---------------------------------------------------------------------------------------------- immutables


@pytest.mark.parametrize(
    ("created", "changed", "mentions"),
    [
        ({"requires_session": True}, {"requires_session": False}, "requiresSession"),
        ({}, {"requires_session": True}, "requiresSession"),
        ({"requires_duplicate_detection": True}, {}, "requiresDuplicateDetection"),
        ({}, {"requires_duplicate_detection": True}, "requiresDuplicateDetection"),
        ({"enable_partitioning": True}, {"enable_partitioning": False}, "Partitioning"),
        ({}, {"enable_partitioning": True}, "Partitioning"),
    ],
)
def test_immutable_queue_properties_cannot_change(
    api: Arm, emulator: EmulatorHandle, created: dict[str, Any], changed: dict[str, Any], mentions: str
) -> None:
    name = unique("q")
    before = api.queues.create_or_update(
        *api.scope, name, SBQueue(properties=SBQueueProperties(max_delivery_count=3, **created))
    )

    message = _refused(
        lambda: api.queues.create_or_update(
            *api.scope, name, SBQueue(properties=SBQueueProperties(max_delivery_count=9, **changed))
        )
    )

    assert mentions in message and "SubCode=40000" in message
    after = api.queues.get(*api.scope, name)
    assert after.max_delivery_count == 3
    assert after.requires_session == before.requires_session
    assert after.requires_duplicate_detection == before.requires_duplicate_detection
    assert after.enable_partitioning == before.enable_partitioning
    assert after.updated_at == before.updated_at


@pytest.mark.parametrize(
    ("created", "changed"),
    [
        ({"requires_duplicate_detection": True}, {}),
        ({}, {"enable_partitioning": True}),
    ],
)
def test_immutable_topic_properties_cannot_change(
    api: Arm, created: dict[str, Any], changed: dict[str, Any]
) -> None:
    name = unique("t")
    api.topics.create_or_update(
        *api.scope, name, SBTopic(properties=SBTopicProperties(max_size_in_megabytes=2048, **created))
    )

    _refused(
        lambda: api.topics.create_or_update(
            *api.scope, name, SBTopic(properties=SBTopicProperties(max_size_in_megabytes=4096, **changed))
        )
    )

    assert api.topics.get(*api.scope, name).max_size_in_megabytes == 2048


def test_subscription_requires_session_cannot_change(api: Arm) -> None:
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(
        *api.scope, topic, name, SBSubscription(properties=SBSubscriptionProperties(requires_session=True))
    )

    message = _refused(
        lambda: api.subscriptions.create_or_update(
            *api.scope, topic, name, SBSubscription(properties=SBSubscriptionProperties(max_delivery_count=2))
        )
    )

    assert "requiresSession" in message
    after = api.subscriptions.get(*api.scope, topic, name)
    assert after.requires_session is True
    assert after.max_delivery_count == 10


def test_an_identical_put_of_immutable_properties_is_accepted(api: Arm) -> None:
    name = unique("q")
    definition = SBQueue(
        properties=SBQueueProperties(
            requires_session=True, requires_duplicate_detection=True, enable_partitioning=True
        )
    )
    api.queues.create_or_update(*api.scope, name, definition)

    again = api.queues.create_or_update(*api.scope, name, definition)

    assert again.requires_session and again.requires_duplicate_detection and again.enable_partitioning


# ---------------------------------------------------------------------------------------------- forwarding


def test_forward_to_a_missing_destination_is_refused(api: Arm) -> None:
    queue, topic, subscription, missing = unique("q"), unique("t"), unique("s"), unique("missing")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    for call in (
        lambda: api.queues.create_or_update(
            *api.scope, queue, SBQueue(properties=SBQueueProperties(forward_to=missing))
        ),
        lambda: api.queues.create_or_update(
            *api.scope,
            queue,
            SBQueue(properties=SBQueueProperties(forward_dead_lettered_messages_to=missing)),
        ),
        lambda: api.subscriptions.create_or_update(
            *api.scope,
            topic,
            subscription,
            SBSubscription(properties=SBSubscriptionProperties(forward_to=missing)),
        ),
        lambda: api.subscriptions.create_or_update(
            *api.scope,
            topic,
            subscription,
            SBSubscription(properties=SBSubscriptionProperties(forward_dead_lettered_messages_to=missing)),
        ),
    ):
        message = _refused(call)
        assert "SubCode=40400" in message and missing in message

    _missing(lambda: api.queues.get(*api.scope, queue))
    _missing(lambda: api.subscriptions.get(*api.scope, topic, subscription))


def test_update_to_forward_to_a_missing_destination_changes_nothing(
    api: Arm, emulator: EmulatorHandle
) -> None:
    queue = unique("q")
    api.queues.create_or_update(
        *api.scope, queue, SBQueue(properties=SBQueueProperties(max_delivery_count=4))
    )

    _refused(
        lambda: api.queues.create_or_update(
            *api.scope, queue, SBQueue(properties=SBQueueProperties(forward_to=unique("missing")))
        )
    )

    after = api.queues.get(*api.scope, queue)
    assert after.forward_to is None and after.max_delivery_count == 4
    send(emulator.connection_string, queue, ServiceBusMessage("still here"))
    assert [str(m) for m in receive_queue(emulator.connection_string, queue, 1)] == ["still here"]


def test_forward_to_itself_is_accepted_as_azure_accepts_it(api: Arm) -> None:
    """The same update the ATOM API takes (SDK test_mgmt_queue_update_success): a cycle of one."""
    queue = unique("q")
    api.queues.create_or_update(*api.scope, queue, SBQueue())

    api.queues.create_or_update(
        *api.scope,
        queue,
        SBQueue(properties=SBQueueProperties(forward_to=queue, forward_dead_lettered_messages_to=queue)),
    )

    updated = api.queues.get(*api.scope, queue)
    assert (updated.forward_to, updated.forward_dead_lettered_messages_to) == (queue, queue)


def test_a_session_enabled_queue_may_forward(api: Arm) -> None:
    source, destination = unique("q"), unique("q")
    api.queues.create_or_update(*api.scope, destination, SBQueue())

    api.queues.create_or_update(
        *api.scope,
        source,
        SBQueue(properties=SBQueueProperties(requires_session=True, forward_to=destination)),
    )

    created = api.queues.get(*api.scope, source)
    assert created.requires_session is True and created.forward_to == destination


def test_deleting_a_forwarding_destination_is_allowed_and_forwarding_then_dead_letters(
    api: Arm, emulator: EmulatorHandle
) -> None:
    source, destination = unique("q"), unique("q")
    api.queues.create_or_update(*api.scope, destination, SBQueue())
    api.queues.create_or_update(
        *api.scope, source, SBQueue(properties=SBQueueProperties(forward_to=destination))
    )

    api.queues.delete(*api.scope, destination)

    _missing(lambda: api.queues.get(*api.scope, destination))
    assert api.queues.get(*api.scope, source).forward_to == destination
    send(emulator.connection_string, source, ServiceBusMessage("orphan"))
    (dead,) = receive_queue(emulator.connection_string, source, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    assert str(dead) == "orphan"
    # Azure names a failed transfer by the exception the destination raised.
    assert dead.dead_letter_reason == "MessagingEntityNotFoundException"
    assert dead.dead_letter_error_description is not None
    assert destination in dead.dead_letter_error_description


# ---------------------------------------------------------------------------------------------- rules


def _topic_with_rule(api: Arm, expression: str) -> tuple[str, str]:
    topic, subscription = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(*api.scope, topic, subscription, SBSubscription())
    api.rules.delete(*api.scope, topic, subscription, "$Default")
    api.rules.create_or_update(
        *api.scope,
        topic,
        subscription,
        "only",
        Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression=expression))),
    )
    return topic, subscription


def test_sql_filter_that_does_not_parse_is_refused_with_its_position(
    api: Arm, emulator: EmulatorHandle
) -> None:
    topic, subscription = _topic_with_rule(api, "color = 'red'")

    message = _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            "broken",
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="color = = 'red'"))),
        )
    )
    assert "position 9" in message
    replaced = _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            "only",
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="color IN ('a'"))),
        )
    )
    assert "position" in replaced

    assert [r.name for r in api.rules.list_by_subscriptions(*api.scope, topic, subscription)] == ["only"]
    rule = api.rules.get(*api.scope, topic, subscription, "only")
    assert rule.sql_filter is not None and rule.sql_filter.sql_expression == "color = 'red'"
    send(
        emulator.connection_string,
        topic,
        ServiceBusMessage("red", application_properties={"color": "red"}),
        ServiceBusMessage("blue", application_properties={"color": "blue"}),
    )
    assert [str(m) for m in receive_subscription(emulator.connection_string, topic, subscription)] == ["red"]


def test_sql_action_that_does_not_parse_is_refused_with_its_position(api: Arm) -> None:
    topic, subscription = _topic_with_rule(api, "1=1")

    message = _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            "stamp",
            Rule(
                properties=Ruleproperties(
                    sql_filter=SqlFilter(sql_expression="1=1"), action=Action(sql_expression="SET = 1")
                )
            ),
        )
    )

    assert "action" in message and "position" in message
    _missing(lambda: api.rules.get(*api.scope, topic, subscription, "stamp"))


def test_empty_correlation_filter_is_refused(api: Arm) -> None:
    topic, subscription = _topic_with_rule(api, "1=1")

    _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            "empty",
            Rule(
                properties=Ruleproperties(
                    filter_type="CorrelationFilter", correlation_filter=CorrelationFilter()
                )
            ),
        )
    )

    _missing(lambda: api.rules.get(*api.scope, topic, subscription, "empty"))


def test_sql_expression_longer_than_1024_characters_is_refused(api: Arm) -> None:
    topic, subscription = _topic_with_rule(api, "1=1")
    expression = "a = '" + "x" * 1030 + "'"

    _refused(
        lambda: api.rules.create_or_update(
            *api.scope,
            topic,
            subscription,
            "long",
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression=expression))),
        )
    )

    _missing(lambda: api.rules.get(*api.scope, topic, subscription, "long"))


# ---------------------------------------------------------------------------------------------- quotas


@pytest.fixture
def private_api(make_emulator: Callable[..., EmulatorHandle]) -> Iterator[tuple[Arm, EmulatorHandle]]:
    handle = make_emulator()
    client = arm(handle.management_port, handle.emulator.management_token)
    yield client, handle
    client.close()


def test_entity_quota_of_the_namespace(
    private_api: tuple[Arm, EmulatorHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, _ = private_api
    monkeypatch.setattr(broker_namespace, "ENTITIES_PER_NAMESPACE", 2)
    api.queues.create_or_update(*api.scope, "first", SBQueue())
    api.topics.create_or_update(*api.scope, "second", SBTopic())

    message = _refused(lambda: api.queues.create_or_update(*api.scope, "third", SBQueue()))
    _refused(lambda: api.topics.create_or_update(*api.scope, "third", SBTopic()))

    assert "SubCode=40300" in message
    assert [q.name for q in api.queues.list_by_namespace(*api.scope)] == ["first"]
    assert [t.name for t in api.topics.list_by_namespace(*api.scope)] == ["second"]
    api.queues.create_or_update(
        *api.scope, "first", SBQueue(properties=SBQueueProperties(max_delivery_count=2))
    )  # updates still work


def test_subscription_quota_of_a_topic(
    private_api: tuple[Arm, EmulatorHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, _ = private_api
    monkeypatch.setattr(broker_namespace, "SUBSCRIPTIONS_PER_TOPIC", 1)
    api.topics.create_or_update(*api.scope, "events", SBTopic())
    api.subscriptions.create_or_update(*api.scope, "events", "one", SBSubscription())

    message = _refused(
        lambda: api.subscriptions.create_or_update(*api.scope, "events", "two", SBSubscription())
    )

    assert "SubCode=40300" in message
    assert [s.name for s in api.subscriptions.list_by_topic(*api.scope, "events")] == ["one"]


@pytest.mark.parametrize(
    ("limit", "rule"),
    [
        (
            "SQL_FILTERS_PER_TOPIC",
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="a = 1"))),
        ),
        (
            "CORRELATION_FILTERS_PER_TOPIC",
            Rule(
                properties=Ruleproperties(
                    filter_type="CorrelationFilter", correlation_filter=CorrelationFilter(label="x")
                )
            ),
        ),
    ],
)
def test_filter_quotas_of_a_topic(
    private_api: tuple[Arm, EmulatorHandle], monkeypatch: pytest.MonkeyPatch, limit: str, rule: Rule
) -> None:
    api, _ = private_api
    api.topics.create_or_update(*api.scope, "events", SBTopic())
    api.subscriptions.create_or_update(*api.scope, "events", "one", SBSubscription())
    api.rules.delete(*api.scope, "events", "one", "$Default")
    monkeypatch.setattr(broker_namespace, limit, 2)
    api.rules.create_or_update(*api.scope, "events", "one", "r1", rule)
    api.rules.create_or_update(*api.scope, "events", "one", "r2", rule)

    message = _refused(lambda: api.rules.create_or_update(*api.scope, "events", "one", "r3", rule))

    assert "SubCode=40300" in message
    assert sorted(r.name for r in api.rules.list_by_subscriptions(*api.scope, "events", "one")) == [
        "r1",
        "r2",
    ]
    api.rules.create_or_update(*api.scope, "events", "one", "r2", rule)  # replacing stays within the quota


def test_a_refused_request_is_an_http_response_error_with_the_arm_body(api: Arm) -> None:
    error = refusal(lambda: api.queues.create_or_update(*api.scope, "bad name", SBQueue()))

    assert isinstance(error, HttpResponseError)
    assert error.response is not None
    body = json.loads(error.response.text())  # .json() is not on the response protocol azure-core types
    assert set(body) == {"error"}
    assert body["error"]["code"] == BAD_REQUEST
    assert "bad name" in body["error"]["message"]
