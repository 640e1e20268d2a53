"""Session triggers (ordered per session, sessions in parallel), batch triggers, and SDK-type bindings
that settle explicitly (dead-letter with a reason, defer, complete)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from devhost.channel.trigger_data import HOST_BATCH_ARRAYS
from devhost.testing import HostHandle, running_host
from emulator.broker.properties import SubscriptionProperties, TopicProperties
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send

SESSIONS = 3
PER_SESSION = 5


@pytest.fixture(scope="module")
def entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    subscription = "batch"
    namespace = shared_emulator.emulator.namespace
    shared_emulator.call(lambda: namespace.create_topic(topic, TopicProperties()))
    shared_emulator.call(
        lambda: namespace.create_subscription(
            topic, subscription, replace(SubscriptionProperties(), lock_duration=timedelta(seconds=30)), []
        )
    )
    return {
        "SESSION_QUEUE": shared_emulator.create_queue(
            requires_session=True, lock_duration=timedelta(seconds=10)
        ),
        "SETTLE_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(seconds=10)),
        "TEXT_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(seconds=10), max_delivery_count=2),
        "UNTYPED_BATCH_QUEUE": shared_emulator.create_queue(
            lock_duration=timedelta(seconds=10), max_delivery_count=2
        ),
        "BATCH_TOPIC": topic,
        "BATCH_SUBSCRIPTION": subscription,
    }


@pytest.fixture(scope="module")
def host(
    shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> Iterator[HostHandle]:
    settings = app_settings(shared_emulator, module_records.path, entities)
    host_json = {
        "version": "2.0",
        "extensions": {"serviceBus": {"maxConcurrentSessions": SESSIONS, "sessionIdleTimeout": "00:00:02"}},
    }
    with running_host(APPS / "advanced_app.py", settings=settings, host_json=host_json) as handle:
        yield handle


def test_session_messages_are_processed_in_order_per_session_with_sessions_in_parallel(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    sessions = [f"s{i}-{run}" for i in range(SESSIONS)]
    messages = [
        ServiceBusMessage(f"{session}:{n}", session_id=session)
        for n, session in itertools.product(range(PER_SESSION), sessions)  # interleaved across sessions
    ]
    send(shared_emulator.connection_string, entities["SESSION_QUEUE"], *messages)
    records = module_records.wait(
        lambda rs: (
            len([r for r in rs if r["function"] == "in_session" and run in r["session_id"]])
            == SESSIONS * PER_SESSION
        ),
        timeout=60,
    )
    mine = [r for r in records if r["function"] == "in_session" and run in r["session_id"]]
    for session in sessions:
        bodies = [r["body"] for r in mine if r["session_id"] == session]
        assert bodies == [f"{session}:{n}" for n in range(PER_SESSION)]
    spans = {
        session: (
            min(r["start"] for r in mine if r["session_id"] == session),
            max(r["end"] for r in mine if r["session_id"] == session),
        )
        for session in sessions
    }
    overlapping = [
        (a, b)
        for a, b in itertools.combinations(sessions, 2)
        if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
    ]
    assert overlapping, f"sessions ran strictly one after another: {spans}"
    # One message at a time within a session.
    for session in sessions:
        own = sorted((r["start"], r["end"]) for r in mine if r["session_id"] == session)
        assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(own))


def test_a_batch_function_receives_many_messages_per_invocation_and_completes_them(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    bodies = [f"{run}-{n}" for n in range(20)]
    topic = entities["BATCH_TOPIC"]
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_topic_sender(topic) as sender,
    ):
        sender.send_messages([ServiceBusMessage(b) for b in bodies])
    records = module_records.wait(
        lambda rs: (
            sum(len([b for b in r["bodies"] if b.startswith(run)]) for r in rs if r["function"] == "in_batch")
            >= len(bodies)
        )
    )
    batches = [[b for b in r["bodies"] if b.startswith(run)] for r in records if r["function"] == "in_batch"]
    received = [b for batch in batches for b in batch]
    assert sorted(received) == sorted(bodies)  # each exactly once
    assert max(len(batch) for batch in batches) > 1
    assert all(set(r["delivery_counts"]) == {1} for r in records if r["function"] == "in_batch")
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_subscription_receiver(topic, entities["BATCH_SUBSCRIPTION"]) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=50) == []


def test_a_batch_of_worker_messages_gets_only_the_trigger_metadata_the_host_sends(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_topic_sender(entities["BATCH_TOPIC"]) as sender,
    ):
        sender.send_messages(
            [ServiceBusMessage(f"meta-{run}-{n}", time_to_live=timedelta(hours=1)) for n in range(3)]
        )
    records = module_records.wait(
        lambda rs: any(any(b.startswith(f"meta-{run}") for b in r.get("bodies", [])) for r in rs)
    )
    batch = next(r for r in records if any(b.startswith(f"meta-{run}") for b in r.get("bodies", [])))
    assert batch["metadata_keys"] == sorted(
        [
            *HOST_BATCH_ARRAYS,
            "ApplicationPropertiesArray",
            "UserPropertiesArray",
            "sys",
        ]
    )
    # Not in the host's arrays, so None in Azure however the message was sent.
    assert set(batch["locked_until"]) == {None}
    assert set(batch["time_to_live"]) == {None}


def test_an_sdk_typed_function_settles_messages_itself(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    queue = entities["SETTLE_QUEUE"]
    send(shared_emulator.connection_string, queue, f"poison-{run}", f"defer-{run}", f"fine-{run}")
    records = module_records.wait(
        lambda rs: len([r for r in rs if r["function"] == "settles_itself" and run in r["body"]]) >= 3
    )
    deferred = next(r for r in records if r.get("body") == f"defer-{run}")
    host.wait_for_invocations(lambda rs: len([r for r in rs if r.function_name == "settles_itself"]) >= 3)
    with ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client:
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            dead = dead_letters.receive_messages(max_message_count=10, max_wait_time=5)
            assert [str(m) for m in dead] == [f"poison-{run}"]
            assert dead[0].dead_letter_reason == "BadInput"
            assert dead[0].dead_letter_error_description == f"poison-{run}"
        with client.get_queue_receiver(queue) as receiver:
            (kept,) = receiver.receive_deferred_messages([deferred["sequence_number"]])
            assert str(kept) == f"defer-{run}"
            receiver.complete_message(kept)
            assert receiver.peek_messages(max_message_count=10) == []
    # Settled by the function, so never again by the host (no invocation ran twice).
    assert len(module_records.of("settles_itself", body=f"fine-{run}")) == 1


def test_a_body_that_is_not_utf8_reaches_a_text_function_with_replacement_characters_as_the_host_decodes_it(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    # The host binds an untyped (string) trigger with BinaryData.ToString(): UTF-8, U+FFFD for each byte
    # that is not (azure-functions-host#3125), never a failed invocation.
    queue = entities["TEXT_QUEUE"]
    run = uuid.uuid4().hex[:6]
    send(shared_emulator.connection_string, queue, ServiceBusMessage(b"\xff\xfe not utf-8 " + run.encode()))
    module_records.wait(lambda rs: any(r.get("text", "").endswith(run) for r in rs))
    [seen] = [r["text"] for r in module_records.of("text_only") if r.get("text", "").endswith(run)]
    assert seen == f"\ufffd\ufffd not utf-8 {run}"
    assert not [r for r in host.invocations if r.function_name == "text_only" and not r.succeeded]


def test_an_untyped_batch_gets_each_body_as_json_net_rewrote_it_and_a_body_that_is_not_json_fails_it(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    # No dataType on a batch: the host binds object[], each body read by Json.NET as an object and the array
    # written back (a date loses its trailing zero, azure-functions-python-worker#1401); the library then
    # gives each message the JSON text of what it parsed.
    queue = entities["UNTYPED_BATCH_QUEUE"]
    run = uuid.uuid4().hex[:6]
    send(shared_emulator.connection_string, queue, f'{{"run": "{run}", "at": "2024-01-19T12:50:41.250940Z"}}')
    records = module_records.wait(lambda rs: any(run in b for r in rs for b in r.get("bodies", [])))
    [body] = [b for r in records if r["function"] == "untyped_batch" for b in r["bodies"] if run in b]
    assert body == f'{{"run": "{run}", "at": "2024-01-19T12:50:41.25094Z"}}'

    # A body Json.NET cannot read fails the binding, so the invocation, before the worker sees it: the
    # message is abandoned, and dead-lettered at the queue's max delivery count (2).
    send(shared_emulator.connection_string, queue, f"not json {run}")
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=60) as dlq,
    ):
        [dead] = dlq.receive_messages(max_message_count=1, max_wait_time=60)
        assert str(dead) == f"not json {run}"
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        dlq.complete_message(dead)
    failed = [r for r in host.invocations if r.function_name == "untyped_batch" and not r.succeeded]
    assert len(failed) == 2
    assert all(
        "Exception binding parameter 'batch': Binding parameters to complex objects" in (r.error or "")
        for r in failed
    )
    assert not any(f"not json {run}" in b for r in module_records.of("untyped_batch") for b in r["bodies"])
