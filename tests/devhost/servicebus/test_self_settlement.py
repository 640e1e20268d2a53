"""A message the function settled itself (over the extension's gRPC client) is never settled again by the
host, on a session trigger as on a plain one, whether the function then returns or raises.

Evidence (Azure/azure-sdk-for-net, sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src):
``Grpc/SettlementService.cs`` settles a gRPC call through the message's ``ServiceBusMessageActions``
(``Primitives/ServiceBusMessageActions.cs``), which settles through the processor's event args -- plain
(``ProcessMessageEventArgs``) or session (``ProcessSessionMessageEventArgs``) alike, so the SDK processor's
autoComplete / abandon-on-failure skips the message as settled -- and records it in ``SettledMessages``
(``TrackMessageAsSettled``, keyed by the message object), which ``Listeners/ServiceBusListener.cs`` skips
after a batch. The host attempts no second settlement and logs nothing about one.

Before the fix devhost asked whether the message's *current* lock token was among those the function
settled; the SDK's ``ServiceBusReceivedMessage.lock_token`` reads None once the message is settled, so the
answer was always no and devhost settled again (refused by the SDK: "already settled"), on both paths.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from devhost.testing import running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send

TRIGGERS = {"settles_in_session": "SESSION_QUEUE", "settles_plain": "PLAIN_QUEUE"}


def _dead_letters(connection_string: str, queue: str) -> list[tuple[str, str | None]]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver,
    ):
        return [(str(m), m.dead_letter_reason) for m in receiver.peek_messages(max_message_count=10)]


def _active(connection_string: str, queue: str, session: str | None) -> list[str]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, session_id=session) as receiver,
    ):
        return [str(m) for m in receiver.peek_messages(max_message_count=10)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("function", sorted(TRIGGERS))
def test_a_message_the_function_settled_itself_is_not_settled_again_by_the_host(
    function: str, shared_emulator: EmulatorHandle, records: Records, caplog: pytest.LogCaptureFixture
) -> None:
    run = uuid.uuid4().hex[:6]
    # Locks of the maximum length: a redelivery within the test's wait can only come from an abandon.
    entities = {
        "SESSION_QUEUE": shared_emulator.create_queue(
            requires_session=True, lock_duration=timedelta(minutes=5)
        ),
        "PLAIN_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
    }
    queue = entities[TRIGGERS[function]]
    session = f"s-{run}" if function == "settles_in_session" else None
    bodies = [f"abandon-{run}", f"deadletter-{run}", f"complete-{run}"]
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"sessionIdleTimeout": "00:00:02"}}}
    settings = app_settings(shared_emulator, records.path, entities)
    with (
        caplog.at_level(logging.WARNING, logger="devhost.ServiceBus"),
        running_host(APPS / "self_settling_app.py", settings=settings, host_json=host_json) as host,
    ):
        send(
            shared_emulator.connection_string,
            queue,
            *(ServiceBusMessage(b, session_id=session) for b in bodies),
        )
        # Every invocation has ended: the abandoned message came back and was completed, the others ran once.
        host.wait_for_invocations(lambda rs: len([r for r in rs if r.function_name == function]) >= 4)
    # The host's own settlements follow each invocation: leaving the block stops the host, which drains them.
    delivered = [(r["body"], r["delivery_count"]) for r in records.of(function)]
    assert sorted(delivered) == sorted([(bodies[0], 1), (bodies[0], 2), (bodies[1], 1), (bodies[2], 1)])
    # The function's abandon released the message at once (delivery count 2, long before its lock lapsed),
    # its dead-letter stands with its reason, and what it completed is gone.
    assert _dead_letters(shared_emulator.connection_string, queue) == [(bodies[1], "SettledByFunction")]
    assert _active(shared_emulator.connection_string, queue, session) == []
    # The host tried no second settlement: nothing logged about a message already settled.
    logged = [r.getMessage() for r in caplog.records if r.name == "devhost.ServiceBus"]
    assert [line for line in logged if "could not" in line] == []
