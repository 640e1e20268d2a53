"""Holding and releasing a key against the emulator and Azurite: the paths the end-to-end test misses.

The trigger is played by a session receiver on the endpoint's queue that settles as functions/subscribers.py
does (complete, dead-letter with the outcome's reason, abandon); the handlers fail by the payload.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from emulator.testing import EmulatorHandle, running_emulator
from shared.amqp.connection import Namespace
from shared.contracts import ContractRegistry, Event
from shared.envelope.sdk import from_received, readable_body
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry, PermanentHandlerError
from shared.handlers.dispatch import Complete, DeadLetter, Retry
from shared.idempotency.records import HandledRecords
from shared.messages import IncomingMessage
from shared.ordering.held_keys import HELD, HeldKeys, held_keys_from_settings
from shared.ordering.ordered import MAX_DELIVERY_COUNT_EXCEEDED, KeyHolding, process_ordered
from shared.ordering.parking import send_resume
from shared.topology import Publisher
from shared.topology.messages import build_message
from shared.topology.names import held_queue
from shared.topology.options import TopicRoutingMode
from tests.azurite import start_table_service, table_connection_string

pytestmark = pytest.mark.timeout(120)


class Noted(Event, contract="Tests.Noted", ordering_key="key"):
    key: str
    text: str


@dataclass
class Handling:
    failing: set[str] = field(default_factory=set)  # texts that fail for good
    flaky: set[str] = field(default_factory=set)  # texts that fail transiently
    handled: list[str] = field(default_factory=list)


HANDLING = Handling()
REGISTRY = HandlerRegistry()


@REGISTRY.handles(Noted)
def note(event: Noted, context: HandlerContext) -> None:
    if event.text in HANDLING.failing:
        raise PermanentHandlerError(f"{event.text} cannot be noted")
    if event.text in HANDLING.flaky:
        raise RuntimeError(f"{event.text} failed for now")
    HANDLING.handled.append(event.text)


RECORDS = HandledRecords(
    TableServiceClient.from_connection_string(table_connection_string()).get_table_client(
        f"t{uuid.uuid4().hex}"
    )
)
ENDPOINT = Endpoint("noter", ContractRegistry(Noted), REGISTRY, ordered=True)


class NoTransport:
    def publisher(self, endpoint_name: str) -> Publisher:
        raise AssertionError("the handlers send nothing")

    def service_bus_client(self) -> ServiceBusClient:
        raise AssertionError("the handlers send nothing")

    def handled_records(self) -> HandledRecords:
        return RECORDS


@dataclass
class Scene:
    emulator: EmulatorHandle
    client: ServiceBusClient
    holding: KeyHolding
    keys: HeldKeys

    def publish(self, key: str, *texts: str) -> list[str]:
        ids = []
        with self.client.get_queue_sender(self.holding.queue) as sender:
            for text in texts:
                message = build_message(
                    Noted(key=key, text=text), TopicRoutingMode.NotMultiplexed, endpoint_name="t"
                )
                sender.send_messages(message)
                ids.append(str(message.message_id))
        return ids

    def trigger(self, times: int) -> None:
        """The session trigger: ``times`` messages, one at a time, settled as the subscriber settles them."""
        for _ in range(times):
            with self.client.get_queue_receiver(
                self.holding.queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5, prefetch_count=0
            ) as receiver:
                [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                incoming = from_received(message, IncomingMessage, body=readable_body(message))
                # The host counts this delivery (the extension's DeliveryCount); the SDK counts earlier ones.
                incoming = replace(incoming, delivery_count=(message.delivery_count or 0) + 1)
                outcome = process_ordered(ENDPOINT, incoming, NoTransport(), self.holding)
                if isinstance(outcome, DeadLetter):
                    receiver.dead_letter_message(
                        message, reason=outcome.reason, error_description=outcome.description
                    )
                elif isinstance(outcome, Retry):
                    receiver.abandon_message(message)
                else:
                    assert isinstance(outcome, Complete)
                    receiver.complete_message(message)

    def dead_letters(self, queue: str) -> list[str]:
        with self.client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
            return [str(m.message_id) for m in receiver.peek_messages(max_message_count=50)]


@pytest.fixture
def scene() -> Iterator[Scene]:
    HANDLING.failing.clear()
    HANDLING.flaky.clear()
    HANDLING.handled.clear()
    with running_emulator() as emulator:
        queue = emulator.create_queue(
            f"noter-{uuid.uuid4().hex[:8]}", requires_session=True, max_delivery_count=2
        )
        emulator.create_queue(held_queue(queue), requires_session=True, requires_duplicate_detection=True)
        keys = held_keys_from_settings({"AzureWebJobsStorage": table_connection_string()})
        with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
            namespace = Namespace.from_connection_string(emulator.connection_string)
            holding = KeyHolding(
                queue, held_queue(queue), keys, client, max_delivery_count=2, namespace=namespace
            )
            yield Scene(emulator, client, holding, keys)


def test_a_parked_message_that_fails_during_the_release_becomes_the_blocker_and_keeps_the_rest_held(
    scene: Scene,
) -> None:
    HANDLING.failing |= {"blocker", "bad"}
    blocker, bad, _ = scene.publish("k1", "blocker", "bad", "c")
    scene.trigger(3)  # the blocker dead-lettered, bad and c parked
    assert scene.dead_letters(scene.holding.queue) == [blocker]
    row = scene.keys.get(scene.holding.queue, "k1")
    assert row is not None and (row.blocker_message_id, row.parked) == (blocker, 2)

    # The blocker is archived: a resume signal releases the key, and bad fails while it is released.
    send_resume(scene.client, scene.holding.queue, "k1", blocker)
    scene.trigger(1)
    assert HANDLING.handled == []
    assert scene.dead_letters(scene.holding.held_queue) == [bad]
    row = scene.keys.get(scene.holding.queue, "k1")
    assert row is not None and (row.status, row.blocker_message_id) == (HELD, bad)

    # bad comes back to the endpoint's queue (the re-drive's target for the hold queue) and now succeeds:
    # it is handled first, then c.
    HANDLING.failing.clear()
    with scene.client.get_queue_sender(scene.holding.queue) as sender:
        sender.send_messages(
            ServiceBusMessage(
                '{"key": "k1", "text": "bad"}',
                session_id="k1",
                message_id=bad,
                application_properties={"NServiceBus.EnclosedMessageTypes": "Tests.Noted"},
                content_type="application/json",
            )
        )
    scene.trigger(1)
    assert HANDLING.handled == ["bad", "c"]
    assert scene.keys.get(scene.holding.queue, "k1") is None


def test_a_message_on_its_last_delivery_holds_its_key_before_it_runs_so_the_brokers_dead_letter_holds_it(
    scene: Scene,
) -> None:
    HANDLING.flaky.add("flaky")
    flaky, _ = scene.publish("k2", "flaky", "after")
    scene.trigger(
        2
    )  # delivery 1 abandoned; delivery 2 is the last (MaxDeliveryCount 2): the key is held first
    row = scene.keys.get(scene.holding.queue, "k2")
    assert row is not None and (row.blocker_message_id, row.reason) == (flaky, MAX_DELIVERY_COUNT_EXCEEDED)
    scene.trigger(1)  # the broker dead-letters flaky on the way; "after" is parked, not handled
    assert scene.dead_letters(scene.holding.queue) == [flaky]
    assert HANDLING.handled == []
    row = scene.keys.get(scene.holding.queue, "k2")
    assert row is not None and row.parked == 1


def test_a_resume_signal_for_a_key_that_is_not_held_by_it_changes_nothing(scene: Scene) -> None:
    HANDLING.failing.add("blocker")
    scene.publish("k3", "blocker", "later")
    scene.trigger(2)
    send_resume(scene.client, scene.holding.queue, "k3", "some-other-message")
    scene.trigger(1)
    assert HANDLING.handled == []
    row = scene.keys.get(scene.holding.queue, "k3")
    assert row is not None and row.parked == 1


def _stop_gracefully(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)  # azurite-table saves its data on SIGINT only
    process.wait(30)
    if process.stderr is not None:
        process.stderr.close()


def test_a_message_on_its_last_delivery_waits_for_unreachable_storage_and_still_holds_its_key(
    scene: Scene, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The held keys' storage is away when a message comes on its last delivery. Failing at once would let
    the broker dead-letter it with no row holding its key, and the key's next message would overtake it;
    the invocation waits for the storage instead (the session stays locked), then holds the key."""
    process, connection = start_table_service(tmp_path / "azurite")
    port = int(connection.split("TableEndpoint=http://127.0.0.1:")[1].split("/")[0])
    keys = held_keys_from_settings({"AzureWebJobsStorage": connection})
    scene.holding = replace(scene.holding, keys=keys, storage_patience=90.0)
    scene.keys = keys
    assert keys.get(scene.holding.queue, "k4") is None  # the table exists before the outage
    HANDLING.flaky.add("flaky")
    flaky, _ = scene.publish("k4", "flaky", "after")
    scene.trigger(1)  # delivery 1 fails for now and is abandoned

    _stop_gracefully(process)
    restarted: list[subprocess.Popen[bytes]] = []

    def restart() -> None:
        time.sleep(6)
        restarted.append(start_table_service(tmp_path / "azurite", port)[0])

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        with caplog.at_level(logging.WARNING, logger="shared.ordering.ordered"):
            scene.trigger(1)  # the last delivery: waits for the storage, holds the key, fails, abandoned
        restarter.join(90)
        waited = [r for r in caplog.records if "storage unreachable while reading key k4" in r.getMessage()]
        assert waited, "the invocation did not meet the outage"
        row = keys.get(scene.holding.queue, "k4")
        assert row is not None
        assert (row.blocker_message_id, row.reason) == (flaky, MAX_DELIVERY_COUNT_EXCEEDED)
        scene.trigger(1)  # the broker dead-lettered flaky; "after" is parked behind it, not handled
        assert scene.dead_letters(scene.holding.queue) == [flaky]
        assert HANDLING.handled == []
        row = keys.get(scene.holding.queue, "k4")
        assert row is not None and row.parked == 1
    finally:
        restarter.join(90)
        for started in restarted:
            _stop_gracefully(started)
