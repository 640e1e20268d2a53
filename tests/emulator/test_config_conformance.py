"""Behaviour specs for configurations Azure would not make silent: JSON nested too deeply, forwarding cycles,
and a restart whose config drops an entity that entities created over ARM forward to.

Decided (docs/emulator.md): Azure checks a forwarding destination only when the source is created or
updated, and a cycle is possible there (through an update); it is accepted, and a message going round it
is dead-lettered with ``MaxTransferHopCountExceeded`` after four hops. The emulator accepts cycles from the
config and over ARM alike, and warns about them at start-up.
"""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties, SBSubscription, SBSubscriptionProperties
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from emulator.broker.properties import EmulatorConfig
from emulator.config import ConfigError, load_config, parse_config
from tests.emulator.arm_client import arm, receive_queue, receive_subscription, send
from tests.emulator.emulator_process import EmulatorProcesses
from tests.emulator.test_cli import assert_exits_before_ready

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

TOKEN = "config-conformance-token"


def _config(queues: list[dict[str, Any]], topics: list[dict[str, Any]] | None = None) -> EmulatorConfig:
    document = {
        "UserConfig": {
            "Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": topics or []}],
            "Logging": {"Type": "Console"},
        }
    }
    return parse_config(json.dumps(document))


# ------------------------------------------------------------------------------------------- nesting


def test_json_nested_100000_levels_deep_is_a_precise_problem_not_a_traceback(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    path = tmp_path / "Config.json"
    path.write_text('{"UserConfig": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert list(raised.value.problems) == [
        "invalid JSON at line 1, column 115: arrays and objects are nested more than 100 levels deep "
        "(a Config.json needs at most 12)"
    ]

    process = processes.start(config=path, in_memory=True, wait=False)
    assert_exits_before_ready(process)
    assert "nested more than 100 levels deep" in process.stderr, process.output()


@pytest.fixture
def processes() -> Iterator[EmulatorProcesses]:
    with EmulatorProcesses() as group:
        yield group


# ------------------------------------------------------------------------------------------- cycles


def test_a_forwarding_cycle_in_the_config_is_accepted_warned_and_dead_letters_at_the_hop_limit(
    make_emulator: Callable[..., EmulatorHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="emulator")
    config = _config(
        [
            {"Name": "cycle-a", "Properties": {"ForwardTo": "cycle-b"}},
            {"Name": "cycle-b", "Properties": {"ForwardTo": "cycle-a"}},
            {"Name": "cycle-out", "Properties": {}},
        ]
    )
    handle = make_emulator(config=config)

    expected = (
        "auto-forwarding cycle between queue 'cycle-a', queue 'cycle-b': accepted as Azure does; a message "
        "that goes round it is dead-lettered with MaxTransferHopCountExceeded after 4 hops"
    )
    assert handle.emulator.startup_warnings == [expected]
    assert expected in caplog.messages

    send(handle.connection_string, "cycle-a", ServiceBusMessage("round and round", message_id="loop-1"))
    # a -> b -> a -> b -> a: the fifth transfer (from a) fails, so the message stops in a's dead-letter queue.
    dead = receive_queue(handle.connection_string, "cycle-a", 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    assert [(str(m), m.message_id, m.dead_letter_reason) for m in dead] == [
        ("round and round", "loop-1", "MaxTransferHopCountExceeded")
    ]


def test_a_forwarding_cycle_through_a_topic_created_over_arm_is_accepted_and_warned_at_start(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    config = _config([], [{"Name": "hub-topic", "Properties": {}}])
    handle = make_emulator(config=config, data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    try:
        api.queues.create_or_update(*api.scope, "hub-queue", SBQueue())
        api.subscriptions.create_or_update(
            *api.scope,
            "hub-topic",
            "to-queue",
            SBSubscription(properties=SBSubscriptionProperties(forward_to="hub-queue")),
        )
        # The cycle closes through an update, as it can on Azure (the destination exists, so it is accepted).
        api.queues.create_or_update(
            *api.scope, "hub-queue", SBQueue(properties=SBQueueProperties(forward_to="hub-topic"))
        )
    finally:
        api.close()
    handle.thread.stop()

    restarted = make_emulator(config=config, data_dir=tmp_path, management_token=TOKEN)

    warnings = restarted.emulator.startup_warnings
    assert len(warnings) == 1
    assert (
        "queue 'hub-queue'" in warnings[0]
        and "subscription 'hub-topic/Subscriptions/to-queue'" in warnings[0]
    )
    assert "topic 'hub-topic'" in warnings[0]


# ------------------------------------------------------------------------------------ dropped destinations


def test_a_restart_that_drops_a_forwarding_destination_warns_naming_the_sources_and_dead_letters_there(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="emulator")
    with_destination = _config(
        [{"Name": "dest-queue", "Properties": {}}], [{"Name": "orders", "Properties": {}}]
    )
    handle = make_emulator(config=with_destination, data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    try:
        api.subscriptions.create_or_update(
            *api.scope,
            "orders",
            "forwarder",
            SBSubscription(properties=SBSubscriptionProperties(forward_to="dest-queue")),
        )
        api.queues.create_or_update(
            *api.scope, "relay-queue", SBQueue(properties=SBQueueProperties(forward_to="dest-queue"))
        )
        api.queues.create_or_update(
            *api.scope,
            "dlq-owner",
            SBQueue(properties=SBQueueProperties(forward_dead_lettered_messages_to="dest-queue")),
        )
    finally:
        api.close()
    handle.thread.stop()

    without_destination = _config([], [{"Name": "orders", "Properties": {}}])
    restarted = make_emulator(config=without_destination, data_dir=tmp_path, management_token=TOKEN)

    warnings = restarted.emulator.startup_warnings
    assert sorted(warnings) == sorted(
        [
            "Subscription 'orders/Subscriptions/forwarder' has ForwardTo 'dest-queue', which does not exist "
            "(it is not in the configuration any more): its messages will be dead-lettered in "
            "'orders/Subscriptions/forwarder' instead of forwarded, as Azure does when a destination is "
            "missing",
            "Queue 'relay-queue' has ForwardTo 'dest-queue', which does not exist (it is not in the "
            "configuration any more): its messages will be dead-lettered in 'relay-queue' instead of "
            "forwarded, as Azure does when a destination is missing",
            "Queue 'dlq-owner' has ForwardDeadLetteredMessagesTo 'dest-queue', which does not exist (it is "
            "not in the configuration any more): its dead-lettered messages will be dead-lettered in "
            "'dlq-owner' instead of forwarded, as Azure does when a destination is missing",
        ]
    )
    assert all(warning in caplog.messages for warning in warnings)

    # Nothing is lost: each source keeps its messages in its own dead-letter queue (where Azure's current
    # documentation puts auto-forward failures; see docs/emulator.md).
    send(restarted.connection_string, "orders", ServiceBusMessage("order-1", message_id="o1"))
    send(restarted.connection_string, "relay-queue", ServiceBusMessage("relay-1", message_id="r1"))
    from_subscription = receive_subscription(
        restarted.connection_string,
        "orders",
        "forwarder",
        1,
        sub_queue=ServiceBusSubQueue.DEAD_LETTER,
    )
    from_queue = receive_queue(
        restarted.connection_string, "relay-queue", 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER
    )
    assert [(m.message_id, m.dead_letter_reason is not None) for m in from_subscription] == [("o1", True)]
    assert [(m.message_id, m.dead_letter_reason is not None) for m in from_queue] == [("r1", True)]


# ------------------------------------------------------------------------------------ the same on ARM


def test_a_deeply_nested_arm_request_body_is_a_400_not_a_server_error(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    handle = make_emulator(management_token=TOKEN)
    body = b'{"properties": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    connection = http.client.HTTPConnection("127.0.0.1", handle.management_port, timeout=30)
    try:
        connection.request(
            "PUT",
            "/subscriptions/x/resourceGroups/y/providers/Microsoft.ServiceBus/namespaces/sbemulatorns"
            "/queues/deep-queue?api-version=2021-11-01",
            body=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        status, error = response.status, json.loads(response.read())["error"]
    finally:
        connection.close()

    assert status == 400
    assert "nested too deeply" in error["message"]
    assert handle.call(lambda: "deep-queue" in handle.emulator.namespace.queues) is False


def test_cycle_detection_handles_a_namespace_sized_chain_without_recursion() -> None:
    """10,000 entities forwarding in one ring plus a tail into it: one cycle, found iteratively."""
    from emulator.forwarding_graph import forwarding_cycles

    ring = [f"q{i:05d}" for i in range(10_000)]
    edges = {name: [ring[(i + 1) % len(ring)]] for i, name in enumerate(ring)}
    edges["tail"] = [ring[0]]

    cycles = forwarding_cycles(edges)

    assert cycles == [ring]
