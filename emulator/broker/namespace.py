"""The namespace: entity registry, send routing (auto-forwarding, dead-letter forwarding), quotas and
the timers that drive scheduled activation and TTL expiry."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from emulator.amqp.message import ParsedMessage, PropertiesField
from emulator.broker import errors
from emulator.broker.errors import BrokerError
from emulator.broker.message import StoredMessage
from emulator.broker.queue import MessageQueue
from emulator.broker.store import Store
from emulator.config import EntityStatus, QueueProperties
from emulator.limits import MAX_MESSAGE_ID_LENGTH, MAX_TRANSFER_HOPS

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
TRANSFER_DEAD_LETTER_SUFFIX = "/$transfer/$deadletterqueue"
HOP_COUNT = "x-opt-transfer-hop-count"


def _ms(td: Any) -> int | None:
    return None if td is None else int(td.total_seconds() * 1000)


class QueueEntity:
    """A queue: its properties, its main message queue and its dead-letter sub-queue."""

    kind = "queue"

    def __init__(self, namespace: Namespace, name: str, props: QueueProperties) -> None:
        self.name = name
        self.props = props
        self.dead_letter = MessageQueue(
            namespace,
            name + "/$DeadLetterQueue",
            lock_duration_ms=_ms(props.lock_duration) or 60_000,
            max_delivery_count=None,
            default_ttl_ms=None,
            dead_letter_on_expiration=False,
            dead_letter_queue=None,
        )
        self.main = MessageQueue(
            namespace,
            name,
            lock_duration_ms=_ms(props.lock_duration) or 60_000,
            max_delivery_count=props.max_delivery_count,
            default_ttl_ms=_ms(props.default_message_time_to_live),
            dead_letter_on_expiration=props.dead_lettering_on_message_expiration,
            dead_letter_queue=self.dead_letter,
            requires_session=props.requires_session,
        )
        self.main.owner = self
        self.dead_letter.owner = self

        # Duplicate detection history: message id → end of its window (ms).
        self.duplicates: dict[str, int] = {}
        self.window_ms = _ms(props.duplicate_detection_history_time_window) or 600_000
        if props.requires_duplicate_detection:
            self.duplicates = dict(namespace.store.message_ids(self.main.key))

    def first_sighting(self, message_id: str | None, now: int) -> bool:
        """Record ``message_id`` in the duplicate-detection window; False when it is a duplicate."""
        if not self.props.requires_duplicate_detection or message_id is None:
            return True
        until = self.duplicates.get(message_id)
        if until is not None and until > now:
            return False
        self.duplicates[message_id] = now + self.window_ms
        return True

    def prune_duplicates(self, store: Store, now: int) -> None:
        expired = [m for m, until in self.duplicates.items() if until <= now]
        for message_id in expired:
            del self.duplicates[message_id]
        if expired:
            store.forget_message_ids(self.main.key, now)

    @property
    def size_bytes(self) -> int:
        return self.main.size_bytes + self.dead_letter.size_bytes

    def queues(self) -> tuple[MessageQueue, ...]:
        return (self.main, self.dead_letter)


class Namespace:
    """All entities of one emulated Service Bus namespace."""

    def __init__(self, name: str, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.store = store
        self._clock = clock
        self.queues: dict[str, QueueEntity] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_handle: asyncio.TimerHandle | None = None
        self._wake_ms: int | None = None

    # ------------------------------------------------------------------------------------------ time

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def call_at_ms(self, when_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        assert self._loop is not None, "namespace not bound to an event loop"
        return self._loop.call_later(max(0.0, (when_ms - self.now_ms()) / 1000), callback, *args)

    def wake_at(self, when_ms: int) -> None:
        """Make sure the timer sweep runs no later than ``when_ms``."""
        if self._loop is None:
            return
        if self._wake_ms is not None and self._wake_ms <= when_ms:
            return
        if self._wake_handle is not None:
            self._wake_handle.cancel()
        self._wake_ms = when_ms
        self._wake_handle = self.call_at_ms(when_ms, self._on_wake)

    def _on_wake(self) -> None:
        self._wake_ms = None
        self._wake_handle = None
        now = self.now_ms()
        for entity in list(self.queues.values()):
            for queue in entity.queues():
                queue.on_timer(now)

    def start(self) -> None:
        """Re-arm timers for restored messages (call once the loop is bound)."""
        self._on_wake()

    # ------------------------------------------------------------------------------------------ entities

    def create_queue(self, name: str, props: QueueProperties, origin: str = "config") -> QueueEntity:
        key = name.lower()
        if key in self.queues:
            raise BrokerError(
                "com.microsoft:entity-already-exists",
                f"Entity '{self.name}:Queue:{name}' already exists.",
                409,
            )
        entity = QueueEntity(self, name, props)
        self.queues[key] = entity
        definition = json.dumps(asdict(props), default=str)
        self.store.save_entity(key, "queue", origin, definition)
        for queue in entity.queues():
            queue.restore()
        return entity

    def delete_queue(self, name: str) -> None:
        entity = self.queues.pop(name.lower(), None)
        if entity is None:
            raise errors.entity_not_found(name, self.name)
        with self.store.transaction():
            for queue in entity.queues():
                self.store.drop_entity_messages(queue.key)
            self.store.delete_entity(name.lower())

    def entity_for(self, path: str) -> QueueEntity:
        entity = self.queues.get(path.lower())
        if entity is None:
            raise errors.entity_not_found(path, self.name)
        return entity

    def receive_queue(self, path: str) -> tuple[QueueEntity, MessageQueue]:
        """Resolve a receive address (queue, or its dead-letter sub-queue) to its message queue."""
        lowered = path.lower().rstrip("/")
        for suffix in (DEAD_LETTER_SUFFIX, TRANSFER_DEAD_LETTER_SUFFIX):
            if lowered.endswith(suffix):
                entity = self.entity_for(path[: len(path.rstrip("/")) - len(suffix)])
                return entity, entity.dead_letter
        entity = self.entity_for(path)
        return entity, entity.main

    # ------------------------------------------------------------------------------------------ sending

    def check_send(self, entity: QueueEntity, messages: list[ParsedMessage]) -> None:
        """Refuse a send the way Azure does: disabled entity, message too large, entity full."""
        if entity.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            raise BrokerError(
                errors.ENTITY_DISABLED,
                f"Messaging entity '{self.name}:Queue:{entity.name}' is currently disabled.",
                400,
            )
        limit = entity.props.max_message_size_in_kilobytes * 1024
        for msg in messages:
            if msg.size > limit:
                raise BrokerError(
                    errors.MESSAGE_SIZE_EXCEEDED,
                    f"The received message (size: {msg.size} bytes) exceeds the limit ({limit} bytes) "
                    f"currently allowed on the link.",
                    413,
                )
        for msg in messages:
            session_id = msg.prop(PropertiesField.GROUP_ID)
            if entity.props.requires_session and session_id is None:
                raise BrokerError(
                    errors.NOT_ALLOWED,
                    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that "
                    "have session support enabled can only receive messages that have the SessionId set to a "
                    "valid value.",
                    400,
                )
            for name, value in (
                ("MessageId", msg.prop(PropertiesField.MESSAGE_ID)),
                ("SessionId", session_id),
            ):
                if value is not None and len(str(value)) > MAX_MESSAGE_ID_LENGTH:
                    raise BrokerError(
                        errors.ARGUMENT_OUT_OF_RANGE,
                        f"The {name} is longer than the maximum of {MAX_MESSAGE_ID_LENGTH} characters.",
                        400,
                    )
        incoming = sum(m.size for m in messages)
        max_bytes = entity.props.max_size_in_megabytes * 1024 * 1024
        if entity.size_bytes + incoming > max_bytes:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum entity size has been reached or exceeded for Queue: "
                f"'{self.name.upper()}:QUEUE:{entity.name.upper()}'. Size of entity in bytes:"
                f"{entity.size_bytes}, Max entity size in bytes: {max_bytes}.",
                403,
            )

    def send(self, path: str, messages: list[ParsedMessage]) -> list[int]:
        """Accept messages sent to ``path`` durably, or raise the error the sender gets.

        Returns the sequence numbers assigned (0 for a duplicate that was dropped)."""
        entity = self.entity_for(path)
        self.check_send(entity, messages)
        with self.store.transaction():
            return self._enqueue(entity, messages, hops=0)

    def _enqueue(self, entity: QueueEntity, messages: list[ParsedMessage], hops: int) -> list[int]:
        now = self.now_ms()
        fresh: list[ParsedMessage] = []
        remembered: list[tuple[str, int]] = []
        for parsed in messages:
            raw_id = parsed.prop(PropertiesField.MESSAGE_ID)
            message_id = None if raw_id is None else str(raw_id)
            if not entity.first_sighting(message_id, now):
                continue  # a duplicate inside the window is accepted and dropped, as in Azure
            fresh.append(parsed)
            if message_id is not None and entity.props.requires_duplicate_detection:
                remembered.append((message_id, entity.duplicates[message_id]))
        if remembered:
            self.store.remember_message_ids(entity.main.key, remembered)
            if len(entity.duplicates) > 10_000:
                entity.prune_duplicates(self.store, now)
        forward_to = entity.props.forward_to
        if forward_to:
            self._forward(entity, forward_to, fresh, hops)
            return [0] * len(messages)
        stored = []
        for parsed in fresh:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now)
            stored.append(msg)
        entity.main.accept(stored)
        entity.main.dispatch()
        by_id = {id(m.parsed): m.sequence_number for m in stored}
        return [by_id.get(id(p), 0) for p in messages]

    def _forward(
        self, source: QueueEntity, target_name: str, messages: list[ParsedMessage], hops: int
    ) -> None:
        if hops >= MAX_TRANSFER_HOPS:
            self._dead_letter_new(
                source,
                messages,
                "MaxTransferHopCountExceeded",
                "Message exceeded the maximum transfer hop count.",
            )
            return
        try:
            target = self.entity_for(target_name)
            self.check_send(target, messages)
        except BrokerError as exc:
            self._dead_letter_new(source, messages, "TransferDestinationUnavailable", exc.description)
            return
        self._enqueue(target, messages, hops + 1)

    def _dead_letter_new(
        self, entity: QueueEntity, messages: list[ParsedMessage], reason: str, description: str
    ) -> None:
        now = self.now_ms()
        stored = []
        for parsed in messages:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now)
            msg.set_application_properties(
                {"DeadLetterReason": reason, "DeadLetterErrorDescription": description}
            )
            msg.dead_letter_source = entity.name
            stored.append(msg)
        entity.dead_letter.accept(stored)
        entity.dead_letter.dispatch()

    def dead_lettered(self, source: MessageQueue, msg: StoredMessage) -> None:
        """Place a message that ``source`` dead-lettered (inside the caller's store transaction)."""
        entity = self._owner(source)
        target_name = entity.props.forward_dead_lettered_messages_to if entity is not None else None
        if target_name:
            try:
                target = self.entity_for(target_name)
                self.check_send(target, [msg.parsed])
            except BrokerError:
                target = None
            if target is not None:
                copy = msg.copy_for(0, 0)
                copy.dead_letter_source = source.path
                target.main.prepare(copy, self.now_ms())
                target.main.accept([copy])
                target.main.dispatch()
                return
        dlq = source.dead_letter_queue
        assert dlq is not None
        dlq.last_sequence = max(dlq.last_sequence, msg.sequence_number)
        dlq.accept([msg])
        dlq.dispatch()

    @staticmethod
    def _owner(queue: MessageQueue) -> QueueEntity | None:
        return queue.owner if isinstance(queue.owner, QueueEntity) else None
