"""Behaviour specs for start-up at namespace scale: a Standard namespace's 10,000 entities load, are all
visible and survive a restart; the store's work per entity saved does not grow with the number of entities
already stored (start-up is linear, observed as SQLite virtual-machine steps, never as time); entities
created over ARM come back after a restart whatever has happened to their forwarding targets since;
recording their ARM metadata and a timer wake-up cost the same whatever the namespace's size.

Timings are measured by ``bench/emulator_startup.py``, not asserted here."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from azure.mgmt.servicebus.models import (
    SBQueue,
    SBQueueProperties,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from emulator.arm.metadata import FILE_NAME, LEGACY_FILE_NAME, Metadata
from emulator.arm.models import Extras
from emulator.broker.properties import EmulatorConfig
from emulator.broker.store import Store
from emulator.config import parse_config
from tests.emulator.arm_client import arm, receive_queue, send, unique

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

TOKEN = "startup-scale-token"
# SQLite calls the progress handler every this many virtual-machine instructions.
VM_STEPS_PER_TICK = 100


def _config(queues: list[str], topics: list[tuple[str, str]]) -> EmulatorConfig:
    """Queues, and topics each with one subscription ``forward`` auto-forwarding to the named queue."""
    document = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": name} for name in queues],
                    "Topics": [
                        {
                            "Name": topic,
                            "Subscriptions": [{"Name": "forward", "Properties": {"ForwardTo": target}}],
                        }
                        for topic, target in topics
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }
    return parse_config(json.dumps(document))


@contextmanager
def _counting_vm_steps(store: Store) -> Iterator[list[int]]:
    """Count the SQLite virtual-machine work done on ``store`` (in ticks of VM_STEPS_PER_TICK)."""
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0  # 0: carry on

    store._db.set_progress_handler(
        tick, VM_STEPS_PER_TICK
    )  # the store's own connection: nothing else sees it
    try:
        yield ticks
    finally:
        store._db.set_progress_handler(None, 0)


def _save_queues(store: Store, names: list[str]) -> None:
    with store.transaction():
        for name in names:
            store.save_entity(name, "queue", "config", "{}")


def test_saving_an_entity_costs_the_same_whatever_the_number_of_entities_already_stored(
    tmp_path: Path,
) -> None:
    # Before: every save looked its case-insensitive name up with a scan of the whole entities table, so
    # loading N entities was quadratic (10,000 entities: 27 s to start, 51 s to restart).
    store = Store(tmp_path / "store.sqlite3")
    try:
        _save_queues(store, [f"warm-{i:05d}" for i in range(50)])
        with _counting_vm_steps(store) as few:
            _save_queues(store, [f"few-{i:05d}" for i in range(200)])
        _save_queues(store, [f"bulk-{i:05d}" for i in range(8000)])
        with _counting_vm_steps(store) as many:
            _save_queues(store, [f"many-{i:05d}" for i in range(200)])
        # Saving the same entity again replaces its row, however it is cased, also at scale.
        _save_queues(store, ["MANY-00007"])
        stored = {path for path, *_ in store.entities()}
    finally:
        store.close()
    # A B-tree lookup grows with log(N); a table scan grew 40 times from 250 to 8,250 rows.
    assert many[0] < 2 * few[0], (few[0], many[0])
    assert "MANY-00007" in stored and "many-00007" not in stored
    assert len(stored) == 50 + 200 + 8000 + 200


def test_a_standard_namespace_of_ten_thousand_entities_starts_and_survives_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    queues = [f"queue-{i:05d}" for i in range(5000)]
    topics = [(f"topic-{i:05d}", queues[i]) for i in range(2500)]
    config = _config(queues, topics)
    handle = make_emulator(config=config, data_dir=tmp_path, management_token=TOKEN)
    send(handle.connection_string, "topic-02499", ServiceBusMessage("kept across the restart"))
    handle.thread.stop()

    restarted = make_emulator(config=config, data_dir=tmp_path, management_token=TOKEN)
    api = arm(restarted.management_port, TOKEN)
    try:
        listed_queues = [q.name for q in api.queues.list_by_namespace(*api.scope, top=1000)]
        listed_topics = [t.name for t in api.topics.list_by_namespace(*api.scope, top=1000)]
        forwarding = api.subscriptions.get(*api.scope, "topic-01234", "forward")
    finally:
        api.close()
    assert listed_queues == queues
    assert listed_topics == [name for name, _ in topics]
    assert forwarding.forward_to == "queue-01234"
    # the message forwarded before the restart is still in the last topic's target queue
    assert [str(m) for m in receive_queue(restarted.connection_string, "queue-02499", 1)] == [
        "kept across the restart"
    ]
    send(restarted.connection_string, "topic-00000", ServiceBusMessage("after the restart"))
    assert [str(m) for m in receive_queue(restarted.connection_string, "queue-00000", 1)] == [
        "after the restart"
    ]


def test_arm_entities_forwarding_to_a_deleted_queue_survive_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    # Azure lets a forwarding target be deleted; the source stays, with its messages. The emulator used to
    # drop such a source (and lose sight of its stored messages) when it restarted.
    target, source, chained, topic = unique("target"), unique("source"), unique("chained"), unique("topic")
    handle = make_emulator(config=_config([], []), data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    api.queues.create_or_update(*api.scope, target, SBQueue())
    api.queues.create_or_update(*api.scope, source, SBQueue(properties=SBQueueProperties(forward_to=target)))
    api.queues.create_or_update(
        *api.scope, chained, SBQueue(properties=SBQueueProperties(forward_dead_lettered_messages_to=source))
    )
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    api.subscriptions.create_or_update(
        *api.scope, topic, "sub", SBSubscription(properties=SBSubscriptionProperties(forward_to=target))
    )
    api.queues.delete(*api.scope, target)
    api.close()
    handle.thread.stop()

    restarted = make_emulator(config=_config([], []), data_dir=tmp_path, management_token=TOKEN)
    api = arm(restarted.management_port, TOKEN)
    try:
        queues = {q.name: q for q in api.queues.list_by_namespace(*api.scope)}
        subscription = api.subscriptions.get(*api.scope, topic, "sub")
    finally:
        api.close()
    assert set(queues) == {source, chained}
    assert queues[source].forward_to == target
    assert queues[chained].forward_dead_lettered_messages_to == source
    assert subscription.forward_to == target


def test_an_arm_subscription_of_a_topic_the_config_no_longer_defines_is_reported_at_start(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("topic")
    handle = make_emulator(config=_config([], [(topic, "")]), data_dir=tmp_path, management_token=TOKEN)
    api = arm(handle.management_port, TOKEN)
    api.subscriptions.create_or_update(*api.scope, topic, "added-over-arm", SBSubscription())
    api.close()
    handle.thread.stop()

    with caplog.at_level(logging.WARNING, logger="emulator"):
        make_emulator(config=_config([], []), data_dir=tmp_path, management_token=TOKEN)
    assert any(
        f"{topic}/Subscriptions/added-over-arm" in record.getMessage() and record.levelno == logging.WARNING
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]


def _bytes_written_by_this_process() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no wchar")


def test_recording_one_entitys_arm_metadata_writes_one_line_not_the_whole_namespace(tmp_path: Path) -> None:
    # Before: the whole metadata file was rewritten after every ARM create, update or delete, so
    # provisioning N entities over ARM wrote O(N^2) bytes (3,000 queues: 20 s; now 1.3 s).
    metadata = Metadata(tmp_path)
    for i in range(5000):
        metadata.record(f"queue-{i:05d}", Extras(), created=True)
    before = _bytes_written_by_this_process()
    metadata.record("one-more", Extras(enable_partitioning=True), created=True)
    metadata.forget("queue-00042")
    written = _bytes_written_by_this_process() - before
    assert written < 4096, written  # the whole namespace is about 750 KB

    reopened = Metadata(tmp_path)
    assert reopened.get("ONE-MORE").extras.enable_partitioning is True
    assert reopened.get("queue-00042").created_at == reopened.started_at  # forgotten
    assert reopened.get("queue-04999").created_at < reopened.started_at


def test_arm_metadata_keeps_what_was_recorded_when_the_last_journal_line_was_cut_short(
    tmp_path: Path,
) -> None:
    # An emulator from before the journal left a single document; a kill can cut the last appended line.
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    (tmp_path / LEGACY_FILE_NAME).write_text(
        json.dumps(
            {
                "legacy-queue": {
                    "createdAt": created.isoformat(),
                    "updatedAt": created.isoformat(),
                    "enablePartitioning": True,
                    "enableExpress": False,
                }
            }
        )
    )
    metadata = Metadata(tmp_path)
    metadata.record("journal-queue", Extras(enable_express=True), created=True)
    with open(tmp_path / FILE_NAME, "a", encoding="utf-8") as journal:
        journal.write('{"path":"torn-queue","createdAt":"2026-')  # killed mid-append

    reopened = Metadata(tmp_path)
    assert reopened.get("legacy-queue").created_at == created
    assert reopened.get("legacy-queue").extras.enable_partitioning is True
    assert reopened.get("journal-queue").extras.enable_express is True
    assert reopened.get("torn-queue").created_at == reopened.started_at
    # the next start compacts: one line per entity, the torn line gone, the legacy document folded in
    assert not (tmp_path / LEGACY_FILE_NAME).exists()
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == 2


def test_a_timer_wake_up_visits_only_the_queues_with_scheduled_or_expiring_messages(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    # Before: every wake-up (a scheduled message falling due, a TTL running out) opened a store transaction
    # on every queue of the namespace: 40 ms on the only event loop with 10,000 entities.
    queues = [f"idle-{i:04d}" for i in range(2000)]
    handle = make_emulator(config=_config(queues, []), data_dir=tmp_path)
    store = handle.emulator.store
    statements: list[str] = []
    handle.call(lambda: store._db.set_trace_callback(statements.append))
    try:
        with (
            ServiceBusClient.from_connection_string(handle.connection_string) as client,
            client.get_queue_sender("idle-1234") as sender,
            client.get_queue_receiver("idle-1234", max_wait_time=10) as receiver,
        ):
            sender.schedule_messages(ServiceBusMessage("due soon"), datetime.now(UTC) + timedelta(seconds=1))
            received = receiver.receive_messages(max_wait_time=10)
            for message in received:
                receiver.complete_message(message)
    finally:
        handle.call(lambda: store._db.set_trace_callback(None))
    assert [str(m) for m in received] == ["due soon"]
    transactions = [s for s in statements if s.strip().upper() == "BEGIN"]
    assert len(transactions) < 20, len(transactions)  # was one per queue and dead-letter queue: 4,000+
