"""Executor side of the replay: send one partition's rows and yield one outcome row per message.

Used as ``rdd.mapPartitions(functools.partial(send_partition, config))``. Per task: one
:class:`~shared.amqp.sender.EntitySender` (Busbar's own AMQP sender, which sends every archived property
with its AMQP type) per target entity (rows arrive sorted by target, so a task holds one open sender at a
time), batches of ``batch_size`` messages sent over the one link with each message's outcome awaited, a
rate limiter (:class:`~shared.rate_limit.BatchPacer`) holding the task to its share of the namespace-wide
rate, and retries with exponential backoff of the messages refused for a transient reason (throttling,
``com.microsoft:server-busy``; a timeout; a lost connection).

Each batch's outcomes are written to the ledger right after the broker answered and before the next batch
is built (:class:`spark.ledger.OutcomeWriter`), so a crash can leave at most the batch in flight per task
sent-but-unrecorded.
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

import proton

from shared.amqp.connection import Namespace, WireError
from shared.amqp.kept_senders import KeptSenders
from shared.amqp.outgoing import OutgoingMessage, outgoing_message
from shared.amqp.sender import MessageTooLarge, SendOutcomeUnknown, SendRefused
from shared.archive.rows import envelope_from_row
from shared.envelope import PartitionKeyPolicy
from shared.rate_limit import BatchPacer
from shared.telemetry.conventions import DESTINATION_NAME
from shared.telemetry.instruments import count, replayed
from shared.telemetry.operations import linked, trace_stamped
from spark.columns import REPORTED
from spark.ledger import FAILED, SENT, OutcomeWriter
from spark.params import Connection, PropertyTransform
from spark.properties import ORIGINAL_MESSAGE_ID_PROPERTY, transformed

SENT_OUTCOME, FAILED_OUTCOME, INVALID_OUTCOME = "sent", "failed", "invalid"
_MAX_BACKOFF_S = 30.0
_MESSAGE_ID_NAMESPACE = uuid.UUID("5b0f6c3e-3c1e-4c55-9d0e-7a3f0c1b2a10")
TRANSIENT_CONDITIONS = frozenset({"com.microsoft:server-busy", "com.microsoft:timeout"})
"""Refusals worth retrying: throttling and a broker-side timeout (azure-servicebus's retryable
``ServiceBusServerBusyError`` and ``OperationTimeoutError``, ``_pyamqp_transport.py``'s condition map)."""
DEAD_TARGET_CONDITIONS = frozenset({"amqp:not-found", "com.microsoft:entity-disabled"})
"""Refusals that hold for every later row to the same target in this task: the entity is gone or disabled."""


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
) -> OutgoingMessage:
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
    message = outgoing_message(copy, PartitionKeyPolicy.REFUSE)
    # With tracing on (an OpenTelemetry SDK installed in the job), the copy carries a ``replay`` span's
    # context: a new trace linked to the archived message's. Without one it keeps the archived context.
    with linked(
        "replay", archived.application_properties, attributes={"busbar.replay.run_id": replay_run_id}
    ):
        return replace(message, application_properties=trace_stamped(message.application_properties))


def is_transient(error: BaseException) -> bool:
    """Whether a send error is worth retrying: throttling, timeouts and connection trouble (not a missing
    or disabled target, a full entity, a message too large or a refused token)."""
    if isinstance(error, SendOutcomeUnknown):
        return True
    if isinstance(error, SendRefused | MessageTooLarge):
        return error.condition in TRANSIENT_CONDITIONS
    if isinstance(error, WireError):  # a refused put-token, a request unanswered: only the latter
        return error.condition is None
    return isinstance(error, proton.ProtonException | OSError)  # the connection could not be made or broke


def is_dead_target(error: BaseException) -> bool:
    """Whether ``error`` says the target entity does not exist or is disabled for send."""
    return isinstance(error, WireError) and error.condition in DEAD_TARGET_CONDITIONS


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:2000]


def _namespace(connection: Connection) -> Namespace:
    if connection.connection_string:
        return Namespace.from_connection_string(connection.connection_string)
    from azure.identity import DefaultAzureCredential  # resolved on the executor: its managed identity

    assert connection.fully_qualified_namespace is not None
    return Namespace.from_credential(connection.fully_qualified_namespace, DefaultAzureCredential())


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
        self.namespace = _namespace(config.connection)
        self.limiter = BatchPacer(config.rate_per_task)
        self.senders = KeptSenders(self.namespace)
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

    def send(
        self, target: str, rows: Sequence[Any], messages: Sequence[OutgoingMessage]
    ) -> Iterator[tuple[Any, ...]]:
        """Send one batch, retrying what was refused for a transient reason; record its outcomes in the
        ledger and yield its outcome rows (in the order of ``rows``)."""
        self.limiter.acquire(len(rows))
        waiting = list(range(len(rows)))
        errors: dict[int, BaseException] = {}
        attempts_of: dict[int, int] = {}
        sent: list[int] = []
        attempts = 0
        while waiting and attempts < self.config.max_attempts:
            attempts += 1
            refused: dict[int, BaseException]
            try:
                with self.senders.sending(target) as sender:
                    outcomes = sender.send_all([messages[index] for index in waiting])
                refused = {
                    index: outcome.error
                    for index, outcome in zip(waiting, outcomes, strict=True)
                    if outcome.error is not None
                }
            except Exception as caught:  # opening the link failed: entity gone, auth, connection, ...
                refused = dict.fromkeys(waiting, caught)
            for index in waiting:
                attempts_of[index] = attempts
                if index not in refused:
                    sent.append(index)
            errors.update(refused)
            dead = next((error for error in refused.values() if is_dead_target(error)), None)
            if dead is not None:
                self.dead_targets[target] = _describe(dead)
            waiting = [index for index, error in refused.items() if is_transient(error)]
            if waiting and attempts < self.config.max_attempts:
                delay = min(_MAX_BACKOFF_S, self.config.backoff_seconds * 2 ** (attempts - 1))
                time.sleep(delay * (0.5 + random.random() / 2))
        failed = [index for index in range(len(rows)) if index not in sent]
        if sent:
            self.batches_sent += 1
            self.messages_sent += len(sent)
            count(replayed, len(sent), {DESTINATION_NAME: target})
            self._maybe_crash()
            self.writer.record([rows[index] for index in sent], SENT, None)
        texts = {index: _describe(errors[index]) for index in failed}
        for text in dict.fromkeys(texts.values()):
            self.writer.record([rows[index] for index in failed if texts[index] == text], FAILED, text)
        at = datetime.now(UTC)
        for index, row in enumerate(rows):
            if index in texts:
                yield self.outcome(row, FAILED_OUTCOME, texts[index], attempts_of[index], None)
            else:
                yield self.outcome(row, SENT_OUTCOME, None, attempts_of[index], at)

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
        messages: list[OutgoingMessage] = []
        for row in rows:
            if row.replay_key in done:  # a retried task: an earlier attempt of this run sent it
                yield self.outcome(row, SENT_OUTCOME, None, 0, None)
                continue
            if pending and (row.target_entity != target or len(pending) >= self.config.batch_size):
                assert target is not None
                yield from self.send(target, pending, messages)
                pending, messages = [], []
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
            target = row.target_entity
            pending.append(row)
            messages.append(message)
        if pending:
            assert target is not None
            yield from self.send(target, pending, messages)

    def close(self) -> None:
        self.senders.close()


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
