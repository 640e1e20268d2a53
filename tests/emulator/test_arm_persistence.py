"""Behaviour specs for ARM changes surviving a restart: entities created over ARM persist with the rest of
the data and coexist with the config file's entities; restarting with the same config wipes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus.models import (
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
from azure.servicebus import ServiceBusMessage

from emulator.broker.properties import EmulatorConfig
from emulator.config import parse_config
from tests.emulator.arm_client import arm, receive_queue, receive_subscription, send

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

TOKEN = "persistence-token"


def _config() -> EmulatorConfig:
    document = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": "config-queue", "Properties": {"MaxDeliveryCount": 4}}],
                    "Topics": [
                        {
                            "Name": "config-topic",
                            "Properties": {},
                            "Subscriptions": [{"Name": "config-sub", "Properties": {}, "Rules": []}],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }
    return parse_config(json.dumps(document))


def _restart(
    make_emulator: Callable[..., EmulatorHandle], handle: EmulatorHandle, data_dir: Path
) -> EmulatorHandle:
    handle.thread.stop()
    return make_emulator(config=_config(), data_dir=data_dir, management_token=TOKEN)


def test_arm_entities_survive_a_restart_next_to_config_entities(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    handle = make_emulator(config=_config(), data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    created = api.queues.create_or_update(
        *api.scope,
        "arm-queue",
        SBQueue(properties=SBQueueProperties(lock_duration=timedelta(seconds=20), enable_partitioning=True)),
    )
    api.topics.create_or_update(
        *api.scope, "arm-topic", SBTopic(properties=SBTopicProperties(requires_duplicate_detection=True))
    )
    api.subscriptions.create_or_update(
        *api.scope,
        "arm-topic",
        "arm-sub",
        SBSubscription(properties=SBSubscriptionProperties(max_delivery_count=3)),
    )
    api.rules.delete(*api.scope, "arm-topic", "arm-sub", "$Default")
    api.rules.create_or_update(
        *api.scope,
        "arm-topic",
        "arm-sub",
        "eu",
        Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression="region = 'eu'"))),
    )
    api.subscriptions.create_or_update(
        *api.scope, "config-topic", "arm-sub-of-config-topic", SBSubscription()
    )
    api.close()
    send(handle.connection_string, "arm-queue", ServiceBusMessage("durable"))

    restarted = _restart(make_emulator, handle, tmp_path)
    api = arm(restarted.management_port, TOKEN)
    try:
        queues = {q.name: q for q in api.queues.list_by_namespace(*api.scope)}
        assert set(queues) == {"arm-queue", "config-queue"}
        assert queues["arm-queue"].lock_duration == timedelta(seconds=20)
        assert queues["arm-queue"].enable_partitioning is True
        assert queues["arm-queue"].created_at == created.created_at
        assert queues["arm-queue"].message_count == 1
        assert queues["config-queue"].max_delivery_count == 4
        assert {t.name for t in api.topics.list_by_namespace(*api.scope)} == {"arm-topic", "config-topic"}
        assert api.topics.get(*api.scope, "arm-topic").requires_duplicate_detection is True
        assert {s.name for s in api.subscriptions.list_by_topic(*api.scope, "config-topic")} == {
            "config-sub",
            "arm-sub-of-config-topic",
        }
        assert api.subscriptions.get(*api.scope, "arm-topic", "arm-sub").max_delivery_count == 3
        assert [r.name for r in api.rules.list_by_subscriptions(*api.scope, "arm-topic", "arm-sub")] == ["eu"]
        # immutable properties are still checked against what was created before the restart
        with pytest.raises(HttpResponseError, match="Partitioning"):
            api.queues.create_or_update(
                *api.scope,
                "arm-queue",
                SBQueue(properties=SBQueueProperties(lock_duration=timedelta(seconds=20))),
            )
    finally:
        api.close()

    assert [str(m) for m in receive_queue(restarted.connection_string, "arm-queue", 1)] == ["durable"]
    send(
        restarted.connection_string,
        "arm-topic",
        ServiceBusMessage("eu", application_properties={"region": "eu"}),
        ServiceBusMessage("us", application_properties={"region": "us"}),
    )
    assert [str(m) for m in receive_subscription(restarted.connection_string, "arm-topic", "arm-sub")] == [
        "eu"
    ]


def test_arm_deletions_survive_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    handle = make_emulator(config=_config(), data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    api.queues.create_or_update(*api.scope, "short-lived", SBQueue())
    api.topics.create_or_update(*api.scope, "short-topic", SBTopic())
    api.subscriptions.create_or_update(*api.scope, "short-topic", "sub", SBSubscription())
    api.queues.delete(*api.scope, "short-lived")
    api.topics.delete(*api.scope, "short-topic")
    api.close()

    restarted = _restart(make_emulator, handle, tmp_path)
    api = arm(restarted.management_port, TOKEN)
    try:
        assert {q.name for q in api.queues.list_by_namespace(*api.scope)} == {"config-queue"}
        assert {t.name for t in api.topics.list_by_namespace(*api.scope)} == {"config-topic"}
    finally:
        api.close()


def test_rule_added_to_a_config_subscription_survives_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    handle = make_emulator(config=_config(), data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    api.rules.create_or_update(
        *api.scope,
        "config-topic",
        "config-sub",
        "added",
        Rule(
            properties=Ruleproperties(
                filter_type="CorrelationFilter", correlation_filter=CorrelationFilter(label="x")
            )
        ),
    )
    api.close()

    restarted = _restart(make_emulator, handle, tmp_path)
    api = arm(restarted.management_port, TOKEN)
    try:
        names = {r.name for r in api.rules.list_by_subscriptions(*api.scope, "config-topic", "config-sub")}
    finally:
        api.close()
    assert "added" in names
