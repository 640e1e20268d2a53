"""What Azure accepts and refuses through ``ServiceBusAdministrationClient`` (sync and ``aio``), pinned where
the SDK's own live tests (``tests/mgmt_tests`` of the azure-servicebus source distribution) found the
emulator answering differently; each checked on the data plane where the property has an effect there."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import ApiVersion, CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter

from tests.emulator.admin_fixtures import AdminEmulator, admin_emulator, fresh
from tests.emulator.arm_client import receive_queue, receive_subscription, send
from tests.emulator.sdk_helpers import app_properties

__all__ = ["admin_emulator"]  # fixture used by name below


# ------------------------------------------------------------------------- forwarding to the queue itself


def test_a_queue_may_forward_and_forward_its_dead_letters_to_itself(admin_emulator: AdminEmulator) -> None:
    """Azure accepts the update (test_mgmt_queue_update_success) and reports the queue's own address; a
    message then goes round until the hop limit dead-letters it, and stays in the dead-letter queue."""
    queue = fresh("q")
    with admin_emulator.admin() as admin:
        description = admin.create_queue(queue)
        address = f"sb://{admin.fully_qualified_namespace}/{queue}"
        description.forward_to = address
        description.forward_dead_lettered_messages_to = address
        admin.update_queue(description)
        updated = admin.get_queue(queue)

    assert updated.forward_to is not None and updated.forward_to.startswith("sb://")
    assert updated.forward_to.endswith(f"/{queue}")
    assert updated.forward_dead_lettered_messages_to == updated.forward_to
    send(admin_emulator.connection_string, queue, ServiceBusMessage("round and round", message_id="m"))
    dead = receive_queue(admin_emulator.connection_string, queue, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    assert [(m.message_id, m.dead_letter_reason) for m in dead] == [("m", "MaxTransferHopCountExceeded")]
    with admin_emulator.admin() as admin:
        runtime = admin.get_queue_runtime_properties(queue)
    assert (runtime.active_message_count, runtime.dead_letter_message_count) == (0, 0)


def test_a_queue_may_forward_to_itself_by_name_async(admin_emulator: AdminEmulator) -> None:
    queue = fresh("q")

    async def update() -> tuple[str | None, str | None]:
        async with admin_emulator.async_admin() as admin:
            description = await admin.create_queue(queue)
            await admin.update_queue(description, forward_to=queue, forward_dead_lettered_messages_to=queue)
            updated = await admin.get_queue(queue)
            return updated.forward_to, updated.forward_dead_lettered_messages_to

    forward_to, forward_dead_letters_to = asyncio.run(update())

    assert forward_to is not None and forward_to.endswith(f"/{queue}")
    assert forward_dead_letters_to == forward_to


# ------------------------------------------------------------------ sessions together with forwarding


def test_a_session_queue_may_forward_to_a_topic_and_its_messages_arrive_there(
    admin_emulator: AdminEmulator,
) -> None:
    """Azure accepts ``requires_session=True`` with ``forward_to`` (test_mgmt_queue_create_with_queue_
    description); the messages are forwarded with their session id."""
    queue, topic = fresh("q"), fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "all")
        admin.create_queue(
            queue, requires_session=True, forward_to=topic, forward_dead_lettered_messages_to=topic
        )
        created = admin.get_queue(queue)

    assert created.requires_session is True
    assert created.forward_to is not None and created.forward_to.endswith(f"/{topic}")
    send(admin_emulator.connection_string, queue, ServiceBusMessage("hello", session_id="s1"))
    received = receive_subscription(admin_emulator.connection_string, topic, "all", 1)
    assert [(str(m), m.session_id) for m in received] == [("hello", "s1")]


def test_a_session_queue_may_forward_to_a_topic_async(admin_emulator: AdminEmulator) -> None:
    queue, topic = fresh("q"), fresh("t")

    async def create() -> tuple[bool | None, str | None]:
        async with admin_emulator.async_admin() as admin:
            await admin.create_topic(topic)
            await admin.create_queue(queue, requires_session=True, forward_to=topic)
            created = await admin.get_queue(queue)
            return created.requires_session, created.forward_to

    requires_session, forward_to = asyncio.run(create())

    assert requires_session is True
    assert forward_to is not None and forward_to.endswith(f"/{topic}")


# ------------------------------------------------------------- MaxMessageSizeInKilobytes: Premium only


def test_max_message_size_is_refused_on_a_standard_namespace_and_not_reported(
    admin_emulator: AdminEmulator,
) -> None:
    """Azure refuses the Premium-only property on Standard, whatever the value (test_mgmt_queue_create_with_
    queue_description, test_mgmt_topic_create_with_topic_description), creating nothing; it does not report
    it either, so a description read and sent back is accepted."""
    queue, topic, plain = fresh("q"), fresh("t"), fresh("q")
    with admin_emulator.admin() as admin:
        assert admin.get_namespace_properties().messaging_sku == "Standard"
        with pytest.raises(HttpResponseError) as on_queue:
            admin.create_queue(queue, max_message_size_in_kilobytes=1024)
        with pytest.raises(HttpResponseError) as on_topic:
            admin.create_topic(topic, max_message_size_in_kilobytes=256)
        description = admin.create_queue(plain)
        description.max_delivery_count = 3
        admin.update_queue(description)
        updated = admin.get_queue(plain)
        names = [q.name for q in admin.list_queues()] + [t.name for t in admin.list_topics()]

    assert on_queue.value.status_code == 400 and "Premium" in str(on_queue.value)
    assert on_topic.value.status_code == 400 and "Premium" in str(on_topic.value)
    assert queue not in names and topic not in names
    assert updated.max_message_size_in_kilobytes is None and updated.max_delivery_count == 3


def test_max_message_size_is_refused_under_api_version_2017_04_which_has_no_such_property(
    admin_emulator: AdminEmulator,
) -> None:
    """The client's ``api_version`` is honoured (test_mgmt_queue_basic_v2017_04, ..._topic_basic_v2017_04)."""
    queue, topic = fresh("q"), fresh("t")
    with admin_emulator.admin(api_version=ApiVersion.V2017_04) as admin:
        admin.create_queue(queue)
        assert admin.get_queue(queue).name == queue
        with pytest.raises(HttpResponseError) as refused:
            admin.create_topic(topic, max_message_size_in_kilobytes=1024)

    assert refused.value.status_code == 400 and "2017-04" in str(refused.value)


def test_max_message_size_is_refused_on_a_standard_namespace_async(admin_emulator: AdminEmulator) -> None:
    queue = fresh("q")

    async def create() -> int:
        async with admin_emulator.async_admin() as admin:
            with pytest.raises(HttpResponseError) as refused:
                await admin.create_queue(queue, max_message_size_in_kilobytes=1024)
            return refused.value.status_code or 0

    assert asyncio.run(create()) == 400


# ----------------------------------- rule property types and SQL parameters (test_mgmt_rule_create)

WHEN = datetime(2020, 7, 5, 11, 12, 13)
SPAN = timedelta(days=1, hours=2, minutes=3)


def test_rules_keep_datetime_and_duration_values_and_sql_parameters_with_their_types(
    admin_emulator: AdminEmulator,
) -> None:
    topic = fresh("t")
    correlation = CorrelationRuleFilter(
        correlation_id="cid", properties={"when": WHEN, "span": SPAN, "big": 2**31 + 2, "flag": False}
    )
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "s")
        admin.create_rule(
            topic,
            "s",
            "corr",
            filter=correlation,
            action=SqlRuleAction("SET at = @at", parameters={"@at": WHEN}),
        )
        admin.create_rule(
            topic,
            "s",
            "sql",
            filter=SqlRuleFilter("level = @level AND tier = @tier", {"@level": 1, "@tier": "a"}),
        )
        corr, sql = admin.get_rule(topic, "s", "corr"), admin.get_rule(topic, "s", "sql")

    assert isinstance(corr.filter, CorrelationRuleFilter)
    assert corr.filter.properties == {"when": WHEN, "span": SPAN, "big": 2**31 + 2, "flag": False}
    assert isinstance(corr.action, SqlRuleAction) and corr.action.parameters == {"@at": WHEN}
    assert isinstance(sql.filter, SqlRuleFilter)
    assert sql.filter.parameters == {"@level": 1, "@tier": "a"}


def test_sql_parameters_and_datetime_correlation_properties_route_messages(
    admin_emulator: AdminEmulator,
) -> None:
    topic = fresh("t")
    when = datetime(2020, 7, 5, 11, 12, 13, tzinfo=UTC)
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "by-sql")
        admin.delete_rule(topic, "by-sql", "$Default")
        admin.create_rule(
            topic,
            "by-sql",
            "level",
            filter=SqlRuleFilter("level = @level", {"@level": 2}),
            action=SqlRuleAction("SET tier = @tier", {"@tier": "gold"}),
        )
        admin.create_subscription(topic, "by-date")
        admin.delete_rule(topic, "by-date", "$Default")
        admin.create_rule(topic, "by-date", "when", filter=CorrelationRuleFilter(properties={"when": WHEN}))

    cs = admin_emulator.connection_string
    send(cs, topic, ServiceBusMessage("low", application_properties={"level": 1}))
    send(cs, topic, ServiceBusMessage("high", application_properties={"level": 2}))
    dated: Any = {"when": when}  # the SDK sends a datetime as an AMQP timestamp (not in its type hints)
    send(cs, topic, ServiceBusMessage("dated", application_properties=dated))
    by_sql = receive_subscription(cs, topic, "by-sql", 1)
    by_date = receive_subscription(cs, topic, "by-date", 1)

    assert [(str(m), app_properties(m).get("tier")) for m in by_sql] == [("high", "gold")]
    assert [str(m) for m in by_date] == ["dated"]
