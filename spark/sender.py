"""Executor side of the replay: send one partition's rows and yield one outcome row per message.

Used as ``rdd.mapPartitions(functools.partial(send_partition, config))``. Per task: one
``ServiceBusClient``, one ``ServiceBusSender`` per target entity (rows arrive sorted by target, so a task
holds one open sender at a time), ``ServiceBusMessageBatch`` batching (cut by ``batch_size`` or by the
link's size limit), a rate limiter (:class:`~shared.rate_limit.BatchPacer`) holding the task to its share
of the namespace-wide rate, and retries with exponential backoff on throttling
(``ServiceBusServerBusyError``) and other transient errors.

Each batch's outcome is written to the ledger right after the broker acknowledged it and before the next
batch is built (:class:`spark.ledger.OutcomeWriter`), so a crash can leave at most the batch in flight per
task sent-but-unrecorded.
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch, ServiceBusSender
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    ServiceBusError,
)

from shared.archive.rows import envelope_from_row
from shared.envelope import PartitionKeyPolicy
from shared.envelope.sdk import to_message
from shared.rate_limit import BatchPacer
from shared.servicebus_errors import is_entity_not_found
from shared.telemetry.conventions import DESTINATION_NAME
from shared.telemetry.instruments import count, replayed
from shared.telemetry.operations import linked, stamp_message
from spark.columns import REPORTED
from spark.ledger import FAILED, SENT, OutcomeWriter
from spark.params import Connection, PropertyTransform
from spark.properties import ORIGINAL_MESSAGE_ID_PROPERTY, transformed

SENT_OUTCOME, FAILED_OUTCOME, INVALID_OUTCOME = "sent", "failed", "invalid"
_MAX_BACKOFF_S = 30.0
_MESSAGE_ID_NAMESPACE = uuid.UUID("5b0f6c3e-3c1e-4c55-9d0e-7a3f0c1b2a10")


@dataclass(frozen=True, slots=True)
class SenderConfig:
    """Everything a send task needs; pickled to the executors."""

    connection: Connection
    ledger_path: str
    replay_run_id: str
    planned_at: datetime
    transform: PropertyTransform
    message_id_policy: str  # preserve | derive
    batch_size: int
    rate_per_task: float  # messages per second; 0: unlimited
    max_attempts: int
    backoff_seconds: float
    crash_after_batches: int | None = None  # test hook: SIGKILL crash_process_group after this many
    crash_process_group: int | None = None


def derived_message_id(replay_key: str) -> str:
    """A stable MessageId derived from the archive identity: the same on every run, so a re-run's copy is
    still a detectable duplicate of the first run's."""
    return str(uuid.uuid5(_MESSAGE_ID_NAMESPACE, replay_key))


def sent_message_id(row: Any, policy: str) -> str:
    """The MessageId a plan row is sent with: the archived one (``preserve``; derived if it had none), or
    always the derived one (``derive``)."""
    if policy == "derive" or not row.message_id:
        return derived_message_id(row.replay_key)
    return str(row.message_id)


def build_message(
    row: Any, transform: PropertyTransform, replay_run_id: str, message_id_policy: str = "preserve"
) -> ServiceBusMessage:
    """The message to send for a plan row: the archived message, MessageId per ``message_id_policy``.

    ``derive`` is for targets whose duplicate detection window still remembers the original MessageId
    (Azure would silently drop the replayed copy); the original goes in ``x-original-message-id``.

    Raises ValueError (e.g. :class:`shared.archive.properties.PropertyCodecError`) for rows that cannot
    be sent as archived, e.g. a PartitionKey that differs from the SessionId."""
    archived = envelope_from_row(row)
    properties = transformed(dict(archived.application_properties), transform, replay_run_id)
    message_id = sent_message_id(row, message_id_policy)
    if row.message_id and message_id != row.message_id:
        properties[ORIGINAL_MESSAGE_ID_PROPERTY] = row.message_id
    copy = replace(archived, message_id=message_id, application_properties=properties)
    # Deliberately stricter than the re-drive and the router (SESSION_WINS): a replay sends what was archived
    # or reports the row invalid, never an altered copy.
    message = to_message(copy, PartitionKeyPolicy.REFUSE)
    # With tracing on (an OpenTelemetry SDK installed in the job), the copy carries a ``replay`` span's
    # context: a new trace linked to the archived message's. Without one it keeps the archived context.
    with linked(
        "replay", archived.application_properties, attributes={"busbar.replay.run_id": replay_run_id}
    ):
        stamp_message(message)
    return message


def is_transient(error: BaseException) -> bool:
    """Whether a send error is worth retrying: throttling, timeouts and connection trouble (not a missing
    target, which the SDK reports as a retryable authentication error)."""
    if is_entity_not_found(error):
        return False
    return isinstance(error, ServiceBusError) and bool(getattr(error, "retryable", False))


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:2000]


def _client(connection: Connection) -> ServiceBusClient:
    if connection.connection_string:
        return ServiceBusClient.from_connection_string(connection.connection_string)
    from azure.identity import DefaultAzureCredential  # resolved on the executor: its managed identity

    assert connection.fully_qualified_namespace is not None
    return ServiceBusClient(connection.fully_qualified_namespace, DefaultAzureCredential())


def _task_identity() -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # called outside Spark (unit use): behave as partition 0, first attempt
        return 0, 0
    return context.partitionId(), context.attemptNumber()


class _PartitionSender:
    """The state of one send task."""

    def __init__(self, config: SenderConfig, writer: OutcomeWriter, attempt: int) -> None:
        self.config = config
        self.writer = writer
        self.attempt = attempt
        self.client = _client(config.connection)
        self.limiter = BatchPacer(config.rate_per_task)
        self.senders: dict[str, ServiceBusSender] = {}
        self.dead_targets: dict[str, str] = {}  # target -> error, for entities that are gone or disabled
        self.batches_sent = 0
        self.messages_sent = 0

    def outcome(
        self, row: Any, outcome: str, error: str | None, attempts: int, at: datetime | None
    ) -> tuple[Any, ...]:
        reported = (
            sent_message_id(row, self.config.message_id_policy)
            if name == "message_id"
            else getattr(row, name)
            for name in REPORTED
        )
        return (
            self.config.replay_run_id,
            *reported,
            outcome,
            error,
            attempts,
            self.config.planned_at,
            at,
        )

    def sender(self, target: str) -> ServiceBusSender:
        if target not in self.senders:
            self.senders[target] = self.client.get_queue_sender(target)
        return self.senders[target]

    def send(
        self, target: str, rows: Sequence[Any], batch: ServiceBusMessageBatch
    ) -> Iterator[tuple[Any, ...]]:
        """Send one batch with retries, record its outcome in the ledger, yield its outcome rows."""
        self.limiter.acquire(len(rows))
        attempts, error = 0, None
        while attempts < self.config.max_attempts:
            attempts += 1
            try:
                self.sender(target).send_messages(batch)
                error = None
                break
            except Exception as caught:  # classified below; nothing may escape unrecorded
                error = caught
                if is_entity_not_found(caught) or isinstance(caught, MessagingEntityDisabledError):
                    self.dead_targets[target] = _describe(caught)
                if not is_transient(caught) or attempts >= self.config.max_attempts:
                    break
                delay = min(_MAX_BACKOFF_S, self.config.backoff_seconds * 2 ** (attempts - 1))
                time.sleep(delay * (0.5 + random.random() / 2))
        if error is None:
            self.batches_sent += 1
            self.messages_sent += len(rows)
            count(replayed, len(rows), {DESTINATION_NAME: target})
            self._maybe_crash()
            self.writer.record(rows, SENT, None)
            at = datetime.now(UTC)
            for row in rows:
                yield self.outcome(row, SENT_OUTCOME, None, attempts, at)
        else:
            text = _describe(error)
            self.writer.record(rows, FAILED, text)
            for row in rows:
                yield self.outcome(row, FAILED_OUTCOME, text, attempts, None)

    def _maybe_crash(self) -> None:
        # Test hook: die after the broker took the batch and before the ledger records it (the window).
        limit, group = self.config.crash_after_batches, self.config.crash_process_group
        if limit is not None and group is not None and self.batches_sent >= limit:
            os.killpg(group, signal.SIGKILL)  # the driver and its JVM
            # Python workers live in the Spark daemon's own process group: this one dies by its pid; any
            # other task's worker dies when it next talks to the dead JVM (after recording its batch).
            os.kill(os.getpid(), signal.SIGKILL)

    def run(self, rows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        done = self.writer.sent_by_earlier_attempts()
        target: str | None = None
        pending: list[Any] = []
        batch: ServiceBusMessageBatch | None = None
        for row in rows:
            if row.replay_key in done:  # a retried task: an earlier attempt of this run sent it
                yield self.outcome(row, SENT_OUTCOME, None, 0, None)
                continue
            if row.target_entity in self.dead_targets:
                yield self.outcome(row, FAILED_OUTCOME, self.dead_targets[row.target_entity], 0, None)
                continue
            try:
                message = build_message(
                    row, self.config.transform, self.config.replay_run_id, self.config.message_id_policy
                )
            except Exception as error:  # bad archived row: report it, keep going
                yield self.outcome(row, INVALID_OUTCOME, _describe(error), 0, None)
                continue
            if pending and (row.target_entity != target or len(pending) >= self.config.batch_size):
                assert target is not None and batch is not None
                yield from self.send(target, pending, batch)
                pending, batch = [], None
            target = row.target_entity
            try:
                if batch is None:
                    batch = self.sender(target).create_message_batch()
                try:
                    batch.add_message(message)
                except MessageSizeExceededError:
                    if not pending:
                        raise
                    yield from self.send(target, pending, batch)
                    pending, batch = [], self.sender(target).create_message_batch()
                    batch.add_message(message)
            except MessageSizeExceededError as error:
                yield self.outcome(row, FAILED_OUTCOME, _describe(error), 0, None)
                continue
            except Exception as error:  # opening the link failed: entity gone, auth, ...
                if is_entity_not_found(error) or isinstance(error, MessagingEntityDisabledError):
                    self.dead_targets[target] = _describe(error)
                yield self.outcome(row, FAILED_OUTCOME, _describe(error), 0, None)
                continue
            pending.append(row)
        if pending:
            assert target is not None and batch is not None
            yield from self.send(target, pending, batch)

    def close(self) -> None:
        for sender in self.senders.values():
            sender.close()
        self.client.close()


def send_partition(config: SenderConfig, rows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    """Send one partition's plan rows (sorted by target, session, sequence number); yield a report row
    (see :data:`spark.report.RESULT_COLUMNS`) for every input row."""
    partition, attempt = _task_identity()
    writer = OutcomeWriter(config.ledger_path, config.replay_run_id, partition, attempt)
    task = _PartitionSender(config, writer, attempt)
    try:
        yield from task.run(rows)
    finally:
        task.close()
