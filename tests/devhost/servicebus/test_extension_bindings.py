"""SDK-type Service Bus triggers run through the real binding extension, as in Azure: the trigger arrives as
``model_binding_data`` decoded by the extension's converter, settlement crosses the host's Settlement gRPC
service, and a message's lock is renewed only while its invocation runs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import SessionCannotBeLockedError

from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send


def _entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    """Fresh queues for every trigger of the extension app (a host listening on them owns them)."""
    return {
        "INSPECT_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(seconds=10)),
        "HOLD_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(seconds=5), max_delivery_count=5),
        "SESSION_QUEUE": shared_emulator.create_queue(
            requires_session=True, lock_duration=timedelta(seconds=10)
        ),
        # Locks of the maximum length: a redelivery within the tests' wait can only come from an abandon.
        "FAIL_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
        "FAIL_BATCH_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
    }


@pytest.fixture(scope="module")
def entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    return _entities(shared_emulator)


@pytest.fixture(scope="module")
def host(
    shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> Iterator[HostHandle]:
    settings = app_settings(shared_emulator, module_records.path, entities)
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"sessionIdleTimeout": "00:00:02"}}}
    with running_host(APPS / "extension_app.py", settings=settings, host_json=host_json) as handle:
        yield handle


def test_an_sdk_typed_function_gets_the_extensions_objects_and_settles_over_grpc(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    queue = entities["INSPECT_QUEUE"]
    send(
        shared_emulator.connection_string,
        queue,
        ServiceBusMessage(f"inspect-{run}", application_properties={"text": "v", "count": 7}),
    )
    module_records.wait(lambda rs: any(r.get("body") == f"inspect-{run}" for r in rs))
    (seen,) = module_records.of("inspects", body=f"inspect-{run}")
    # The extension's converter decodes the raw AMQP bytes with uamqp into the SDK's message class.
    assert seen["message_class"] == "azure.servicebus._common.message.ServiceBusReceivedMessage"
    assert seen["amqp_class"].startswith("uamqp.")
    # ... and the string property arrives as bytes, as the uamqp decoding gives it in Azure.
    assert seen["properties"] == {"b'text'": "bytes", "b'count'": "int"}
    assert seen["actions_class"] == (
        "azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions.ServiceBusMessageActions"
    )
    assert host.host.settlement is not None
    port = host.host.settlement.port  # the host's Settlement service
    assert seen["actions_uri"] == f"127.0.0.1:{port}"
    # ... from the arguments the worker process was started with, as the Functions host starts it.
    assert seen["worker_argv"] == [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--functions-grpc-max-message-length",
        "2147483647",
    ]
    # The host answers an unknown lock token over gRPC with FailedPrecondition.
    code, details = seen["stranger_error"].split("|", 1)
    assert code == "StatusCode.FAILED_PRECONDITION" and details.endswith("not found.")
    # The function's complete crossed gRPC and reached the receiver holding the message.
    records = host.wait_for_invocations(
        lambda rs: any(r.function_name == "inspects" and r.succeeded for r in rs)
    )
    # The host's Settlement service took the function's calls for the message it holds, in order (the
    # stranger's complete, refused, is not one of them).
    [calls] = [r.settlement_calls for r in records if r.function_name == "inspects" and r.succeeded]
    assert calls == ("RenewMessageLock", "Complete")
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=10) == []


def test_an_unsettled_message_is_redelivered_once_its_lock_lapses_after_the_invocation(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    send(shared_emulator.connection_string, entities["HOLD_QUEUE"], f"hold-{run}")
    records = module_records.wait(
        lambda rs: len([r for r in rs if r.get("body") == f"hold-{run}"]) >= 2, timeout=45
    )
    counts = [r["delivery_count"] for r in records if r.get("body") == f"hold-{run}"]
    assert counts[:2] == [1, 2]


def _dead_letters(connection_string: str, queue: str, count: int) -> list[Any]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver,
    ):
        found: list[Any] = []
        deadline = time.monotonic() + 30
        while len(found) < count and time.monotonic() < deadline:
            found += receiver.receive_messages(max_message_count=count - len(found), max_wait_time=1)
        for message in found:
            receiver.complete_message(message)
        return found


def test_a_failed_invocation_abandons_what_the_function_left_unsettled_even_without_autocomplete(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    # As the host: a failed invocation goes back to the SDK processor, which abandons every message the
    # function did not settle, whatever autoCompleteMessages says (MessageProcessor.CompleteProcessingMessage
    # rethrows; ReceiverManager.ProcessOneMessage abandons unless IsSettled). The message comes back at once
    # with its delivery count raised, not when its 5-minute lock lapses.
    run = uuid.uuid4().hex[:6]
    send(shared_emulator.connection_string, entities["FAIL_QUEUE"], f"fails-{run}")
    send(shared_emulator.connection_string, entities["FAIL_QUEUE"], f"settled-then-fails-{run}")
    records = module_records.wait(
        lambda rs: len([r for r in rs if r.get("body") == f"fails-{run}"]) >= 2, timeout=30
    )
    assert [r["delivery_count"] for r in records if r.get("body") == f"fails-{run}"] == [1, 2]
    # What the function settled before it failed stays settled: dead-lettered with its reason, not abandoned.
    [dead] = _dead_letters(shared_emulator.connection_string, entities["FAIL_QUEUE"], 1)
    assert (str(dead), dead.dead_letter_reason) == (f"settled-then-fails-{run}", "HandledBeforeFailing")
    assert len(module_records.of("fails_unsettled", body=f"settled-then-fails-{run}")) == 1
    outcomes = [r.outcome for r in host.invocations if r.function_name == "fails_unsettled"]
    assert outcomes.count("Failed") >= 2


def test_a_failed_batch_abandons_what_the_function_left_unsettled_even_without_autocomplete(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    # ServiceBusListener.TriggerAndCompleteMessagesInternal: "For failed executions, we abandon the messages
    # regardless of the autoCompleteMessages configuration", skipping those the function settled.
    run = uuid.uuid4().hex[:6]
    bodies = [f"keep-{run}", f"retry-{run}"]
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_sender(entities["FAIL_BATCH_QUEUE"]) as sender,
    ):
        sender.send_messages([ServiceBusMessage(body) for body in bodies])
    retry = f"retry-{run}"

    def deliveries_of_retry(records: list[dict[str, Any]]) -> list[int]:
        return [
            count
            for r in records
            if r["function"] == "fails_batch_unsettled"
            for body, count in zip(r["bodies"], r["delivery_counts"], strict=True)
            if body == retry
        ]

    # The function completes a batch once all of it is redelivered; each failed batch before that abandoned
    # the retry message (delivery count up by one each time) and dead-lettered the keep message.
    module_records.wait(lambda rs: any(count > 1 for count in deliveries_of_retry(rs)), timeout=30)
    counts = deliveries_of_retry(module_records.all())
    assert counts == list(range(1, len(counts) + 1)) and len(counts) >= 2
    [dead] = _dead_letters(shared_emulator.connection_string, entities["FAIL_BATCH_QUEUE"], 1)
    assert (str(dead), dead.dead_letter_reason) == (f"keep-{run}", "HandledBeforeFailing")


def test_session_operations_cross_grpc_to_the_receiver_holding_the_session(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    session = f"s-{run}"
    queue = entities["SESSION_QUEUE"]
    send(shared_emulator.connection_string, queue, ServiceBusMessage(f"sess-{run}", session_id=session))
    module_records.wait(lambda rs: any(r.get("body") == f"sess-{run}" for r in rs))
    (seen,) = module_records.of("in_session", body=f"sess-{run}")
    assert seen["session_lock_renewed_until"].endswith("Z")
    records = host.wait_for_invocations(
        lambda rs: any(r.function_name == "in_session" and r.succeeded for r in rs)
    )
    # Session operations are not message settlements: the one call the host records is the complete.
    assert [r.settlement_calls for r in records if r.function_name == "in_session"] == [("Complete",)]
    # devhost holds the session until it idles out; wait for it to be released, then read its state.
    with ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client:
        deadline = time.monotonic() + 90
        while True:
            try:
                with client.get_queue_receiver(queue, session_id=session, max_wait_time=5) as receiver:
                    assert receiver.session.get_state() == f"state-sess-{run}".encode()
                    assert receiver.peek_messages(max_message_count=5) == []
                    break
            except SessionCannotBeLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
