"""The ``aio`` ServiceBusAdministrationClient against the emulator's ATOM API: every public method, with
its error cases, and the effect checked on the AMQP data plane."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio.management import ServiceBusAdministrationClient
from azure.servicebus.management import CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter

from tests.emulator.admin_fixtures import AdminEmulator, admin_emulator, fresh
from tests.emulator.arm_client import receive_queue, send
from tests.emulator.sdk_helpers import app_properties

__all__ = ["admin_emulator"]  # fixture used by name below


def run(coroutine: object) -> None:
    asyncio.run(coroutine)  # type: ignore[arg-type]


def test_async_queue_and_topic_operations(admin_emulator: AdminEmulator) -> None:
    queue, topic = fresh("q"), fresh("t")

    async def scenario() -> None:
        async with admin_emulator.async_admin() as admin:
            namespace = await admin.get_namespace_properties()
            assert namespace.name == admin_emulator.emulator.namespace.name

            created = await admin.create_queue(
                queue, max_delivery_count=4, lock_duration=timedelta(seconds=15)
            )
            assert created.max_delivery_count == 4
            with pytest.raises(ResourceExistsError):
                await admin.create_queue(queue)
            created.max_delivery_count = 8
            await admin.update_queue(created)
            assert (await admin.get_queue(queue)).max_delivery_count == 8
            assert queue in [q.name async for q in admin.list_queues()]
            runtime = await admin.get_queue_runtime_properties(queue)
            assert runtime.total_message_count == 0
            listed = {q.name: q async for q in admin.list_queues_runtime_properties()}
            assert listed[queue].active_message_count == 0

            made = await admin.create_topic(topic, default_message_time_to_live=timedelta(hours=2))
            assert made.default_message_time_to_live == timedelta(hours=2)
            made.default_message_time_to_live = timedelta(hours=3)
            await admin.update_topic(made)
            assert (await admin.get_topic(topic)).default_message_time_to_live == timedelta(hours=3)
            assert topic in [t.name async for t in admin.list_topics()]
            assert (await admin.get_topic_runtime_properties(topic)).subscription_count == 0
            topics = {t.name: t async for t in admin.list_topics_runtime_properties()}
            assert topics[topic].subscription_count == 0

            await admin.delete_topic(topic)
            with pytest.raises(ResourceNotFoundError):
                await admin.get_topic(topic)
            with pytest.raises(ResourceNotFoundError):
                await admin.delete_topic(topic)

    run(scenario())
    send(admin_emulator.connection_string, queue, ServiceBusMessage("async-made"))
    assert [str(m) for m in receive_queue(admin_emulator.connection_string, queue, 1)] == ["async-made"]

    async def cleanup() -> None:
        async with admin_emulator.async_admin() as admin:
            await admin.delete_queue(queue)
            with pytest.raises(ResourceNotFoundError):
                await admin.get_queue(queue)

    run(cleanup())


def test_async_subscription_and_rule_operations_route_messages(admin_emulator: AdminEmulator) -> None:
    topic, target = fresh("t"), fresh("q")

    async def scenario() -> None:
        async with admin_emulator.async_admin() as admin:
            await admin.create_queue(target)
            await admin.create_topic(topic)
            subscription = await admin.create_subscription(topic, "s", max_delivery_count=3)
            assert subscription.max_delivery_count == 3
            with pytest.raises(ResourceExistsError):
                await admin.create_subscription(topic, "s")
            subscription.forward_to = target
            await admin.update_subscription(topic, subscription)
            fetched = await admin.get_subscription(topic, "s")
            assert fetched.forward_to is not None and fetched.forward_to.endswith(f"/{target}")
            assert [s.name async for s in admin.list_subscriptions(topic)] == ["s"]
            runtime = await admin.get_subscription_runtime_properties(topic, "s")
            assert runtime.total_message_count == 0
            assert [s.name async for s in admin.list_subscriptions_runtime_properties(topic)] == ["s"]

            await admin.delete_rule(topic, "s", "$Default")
            rule = await admin.create_rule(
                topic,
                "s",
                "eu",
                filter=CorrelationRuleFilter(properties={"region": "eu"}),
                action=SqlRuleAction("SET stamped = 1"),
            )
            assert rule.name == "eu"
            got = await admin.get_rule(topic, "s", "eu")
            assert isinstance(got.filter, CorrelationRuleFilter)
            assert got.filter.properties is not None
            assert dict(got.filter.properties) == {"region": "eu"}
            got.filter = SqlRuleFilter("region = 'eu' OR region = 'uk'")
            await admin.update_rule(topic, "s", got)
            rules = [r async for r in admin.list_rules(topic, "s")]
            assert [(r.name, type(r.filter).__name__) for r in rules] == [("eu", "SqlRuleFilter")]
            with pytest.raises(ResourceNotFoundError):
                await admin.get_rule(topic, "s", "missing")
            with pytest.raises(HttpResponseError) as refused:
                await admin.create_rule(topic, "s", "bad", filter=SqlRuleFilter("region ="))
            assert refused.value.status_code == 400

    run(scenario())
    send(
        admin_emulator.connection_string,
        topic,
        ServiceBusMessage("uk", application_properties={"region": "uk"}),
        ServiceBusMessage("us", application_properties={"region": "us"}),
    )
    (forwarded,) = receive_queue(admin_emulator.connection_string, target, 1)
    assert str(forwarded) == "uk"
    assert app_properties(forwarded)["stamped"] == 1

    async def cleanup() -> None:
        async with admin_emulator.async_admin() as admin:
            await admin.delete_rule(topic, "s", "eu")
            await admin.delete_subscription(topic, "s")
            with pytest.raises(ResourceNotFoundError):
                await admin.get_subscription(topic, "s")

    run(cleanup())


def test_async_client_with_a_wrong_key_is_refused(admin_emulator: AdminEmulator) -> None:
    wrong = admin_emulator.admin_connection_string.replace("SAS_KEY_VALUE", "not-the-key")

    async def scenario() -> None:
        async with ServiceBusAdministrationClient.from_connection_string(
            wrong, connection_verify=admin_emulator.ca_file, retry_total=0
        ) as admin:
            with pytest.raises(ClientAuthenticationError):
                await admin.get_namespace_properties()

    run(scenario())
