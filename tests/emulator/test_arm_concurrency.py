"""Behaviour specs for concurrent ARM writes: 20 simultaneous create_or_update calls for the same
subscription and rules, each from its own client and connection, leave exactly one consistent entity
(what ARM reports is what the broker routes by) and never answer 500."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
from azure.mgmt.servicebus.models import (
    Rule,
    Ruleproperties,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
    SqlFilter,
)
from azure.servicebus import ServiceBusMessage

from tests.emulator.arm_client import Arm, arm, receive_subscription, send, unique

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

WORKERS = 20


@pytest.fixture
def clients(emulator: EmulatorHandle) -> Iterator[list[Arm]]:
    made = [arm(emulator.management_port, emulator.emulator.management_token) for _ in range(WORKERS)]
    yield made
    for client in made:
        client.close()


def _all_at_once[T](clients: list[Arm], call: Callable[[int, Arm], T]) -> list[T]:
    """Run ``call(i, client)`` for every client at the same moment; re-raise the first failure."""
    barrier = threading.Barrier(len(clients))

    def run(index: int) -> T:
        barrier.wait(10)
        return call(index, clients[index])

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(run, range(len(clients))))


def test_concurrent_puts_of_one_subscription_leave_one_subscription(
    clients: list[Arm], emulator: EmulatorHandle
) -> None:
    api = clients[0]
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())

    results = _all_at_once(
        clients,
        lambda i, c: c.subscriptions.create_or_update(
            *c.scope,
            topic,
            name,
            SBSubscription(properties=SBSubscriptionProperties(max_delivery_count=i + 1)),
        ),
    )

    assert all(r.name == name for r in results)
    (listed,) = api.subscriptions.list_by_topic(*api.scope, topic)
    assert listed.name == name
    assert listed.max_delivery_count in {r.max_delivery_count for r in results}
    assert [r.name for r in api.rules.list_by_subscriptions(*api.scope, topic, name)] == ["$Default"]
    keys = emulator.call(lambda: list(emulator.emulator.namespace.topics[topic.lower()].subscriptions))
    assert keys == [name.lower()]
    send(emulator.connection_string, topic, ServiceBusMessage("once"))
    assert [str(m) for m in receive_subscription(emulator.connection_string, topic, name)] == ["once"]


def test_concurrent_puts_of_one_rule_leave_one_rule_that_routes_as_reported(
    clients: list[Arm], emulator: EmulatorHandle
) -> None:
    api = clients[0]
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(*api.scope, topic, name, SBSubscription())
    api.rules.delete(*api.scope, topic, name, "$Default")

    results = _all_at_once(
        clients,
        lambda i, c: c.rules.create_or_update(
            *c.scope,
            topic,
            name,
            "pick",
            Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression=f"n = {i}"))),
        ),
    )

    assert {r.sql_filter.sql_expression for r in results if r.sql_filter} == {
        f"n = {i}" for i in range(WORKERS)
    }
    (rule,) = api.rules.list_by_subscriptions(*api.scope, topic, name)
    assert rule.name == "pick" and rule.sql_filter is not None
    winner = rule.sql_filter.sql_expression
    send(
        emulator.connection_string,
        topic,
        *(ServiceBusMessage(f"n={i}", application_properties={"n": i}) for i in range(WORKERS)),
    )
    received = [str(m) for m in receive_subscription(emulator.connection_string, topic, name)]
    assert received == [str(winner).replace(" ", "")]


def test_concurrent_puts_of_a_subscription_and_its_rules_never_fail(
    clients: list[Arm], emulator: EmulatorHandle
) -> None:
    api = clients[0]
    topic, name = unique("t"), unique("s")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(*api.scope, topic, name, SBSubscription())

    def write(i: int, client: Arm) -> str:
        if i % 2 == 0:
            return str(
                client.subscriptions.create_or_update(*client.scope, topic, name, SBSubscription()).name
            )
        rule = Rule(properties=Ruleproperties(sql_filter=SqlFilter(sql_expression=f"kind = '{i % 3}'")))
        return str(client.rules.create_or_update(*client.scope, topic, name, f"rule-{i % 3}", rule).name)

    results = _all_at_once(clients, write)

    assert set(results) == {name, "rule-0", "rule-1", "rule-2"}
    rules = sorted(r.name for r in api.rules.list_by_subscriptions(*api.scope, topic, name))
    assert rules == ["$Default", "rule-0", "rule-1", "rule-2"]
    assert len(list(api.subscriptions.list_by_topic(*api.scope, topic))) == 1
