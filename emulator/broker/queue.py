"""A message queue: the storage and delivery engine behind a queue, a subscription or a dead-letter
sub-queue. Peek-lock, lock expiry, abandon, defer, dead-letter, TTL expiry and competing consumers."""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from emulator.broker.errors import lock_lost
from emulator.broker.message import SCHEDULED_ENQUEUE_TIME, MessageState, StoredMessage

if TYPE_CHECKING:
    from emulator.broker.namespace import Namespace

MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"


class Consumer(Protocol):
    """A receiving link as the queue sees it."""

    receive_and_delete: bool

    def credit(self) -> int: ...

    def deliver(self, message: StoredMessage, settled: bool) -> None: ...


class MessageQueue:
    """One ordered store of messages with its consumers and locks."""

    def __init__(
        self,
        namespace: Namespace,
        path: str,
        *,
        lock_duration_ms: int,
        max_delivery_count: int | None,
        default_ttl_ms: int | None,
        dead_letter_on_expiration: bool,
        dead_letter_queue: MessageQueue | None,
    ) -> None:
        self.namespace = namespace
        self.path = path
        self.key = path.lower()
        self.lock_duration_ms = lock_duration_ms
        self.max_delivery_count = max_delivery_count
        self.default_ttl_ms = default_ttl_ms
        self.dead_letter_on_expiration = dead_letter_on_expiration
        self.dead_letter_queue = dead_letter_queue
        self.messages: dict[int, StoredMessage] = {}
        self.locks: dict[uuid.UUID, StoredMessage] = {}
        self.size_bytes = 0
        self.last_sequence = 0
        self.consumers: list[Consumer] = []
        self._available: list[int] = []
        self._expiring: list[tuple[int, int]] = []
        self._scheduled: list[tuple[int, int]] = []
        self._rotation = 0
        self._dispatching = False
        # Called with each message that becomes deliverable; the namespace uses it for auto-forwarding.
        self.on_available: Callable[[MessageQueue, StoredMessage], bool] | None = None
        # The entity this queue belongs to (set by the entity), for routing dead letters.
        self.owner: object | None = None

    # ------------------------------------------------------------------------------------------ loading

    def restore(self) -> None:
        """Load this queue's messages from the store (start-up)."""
        store = self.namespace.store
        self.last_sequence = store.last_sequence(self.key)
        now = self.namespace.now_ms()
        for row in store.load(self.key):
            msg = StoredMessage.from_store(row[7], *row[:7])
            self.messages[msg.sequence_number] = msg
            self.size_bytes += msg.size
            self._track(msg, now)

    # ------------------------------------------------------------------------------------------ enqueue

    def next_sequence(self) -> int:
        self.last_sequence += 1
        return self.last_sequence

    def accept(self, messages: list[StoredMessage]) -> None:
        """Store new messages (sequence numbers already assigned) and make them deliverable.

        The caller holds the store transaction, so nothing is visible until it commits."""
        store = self.namespace.store
        store.insert(self.key, messages)
        store.save_sequence(self.key, self.last_sequence)
        now = self.namespace.now_ms()
        for msg in messages:
            self.messages[msg.sequence_number] = msg
            self.size_bytes += msg.size
            self._track(msg, now)

    def prepare(self, msg: StoredMessage, now: int) -> None:
        """Fill in broker fields of a message about to be accepted into this queue."""
        msg.sequence_number = self.next_sequence()
        msg.enqueued_ms = now
        ttl = msg.ttl_ms
        if self.default_ttl_ms is not None and (ttl is None or ttl > self.default_ttl_ms):
            ttl = self.default_ttl_ms  # the entity default is a ceiling, applied silently as in Azure
        scheduled = msg.parsed.message_annotations.get(SCHEDULED_ENQUEUE_TIME)
        if scheduled is not None and int(scheduled) > now:
            msg.state = MessageState.SCHEDULED
            msg.scheduled_ms = int(scheduled)
        start = msg.scheduled_ms if msg.scheduled_ms is not None else now
        msg.expires_ms = None if ttl is None else start + ttl

    def _track(self, msg: StoredMessage, now: int) -> None:
        if msg.state is MessageState.SCHEDULED and msg.scheduled_ms is not None:
            heapq.heappush(self._scheduled, (msg.scheduled_ms, msg.sequence_number))
            self.namespace.wake_at(msg.scheduled_ms)
            return
        if msg.expires_ms is not None:
            heapq.heappush(self._expiring, (msg.expires_ms, msg.sequence_number))
            self.namespace.wake_at(msg.expires_ms)
        if msg.state is MessageState.ACTIVE:
            self._make_available(msg)

    def _make_available(self, msg: StoredMessage) -> None:
        if self.on_available is not None and self.on_available(self, msg):
            return
        if not msg.available:
            msg.available = True
            heapq.heappush(self._available, msg.sequence_number)

    # ------------------------------------------------------------------------------------------ delivery

    def attach(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def detach(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def dispatch(self) -> None:
        """Hand available messages to consumers with credit, round-robin."""
        if self._dispatching or not self._available or not self.consumers:
            return
        self._dispatching = True
        try:
            now = self.namespace.now_ms()
            while self._available:
                consumer = self._next_consumer()
                if consumer is None:
                    return
                msg = self._pop_available(now)
                if msg is None:
                    return
                if consumer.receive_and_delete:
                    with self.namespace.store.transaction():
                        self._remove(msg)
                    consumer.deliver(msg, True)
                else:
                    self._lock(msg, now, consumer)
                    consumer.deliver(msg, False)
        finally:
            self._dispatching = False

    def _next_consumer(self) -> Consumer | None:
        consumers = self.consumers
        count = len(consumers)
        for i in range(count):
            consumer = consumers[(self._rotation + i) % count]
            if consumer.credit() > 0:
                self._rotation = (self._rotation + i + 1) % count
                return consumer
        return None

    def _pop_available(self, now: int) -> StoredMessage | None:
        while self._available:
            seq = heapq.heappop(self._available)
            msg = self.messages.get(seq)
            if msg is None or not msg.available:
                continue
            msg.available = False
            if msg.expires_ms is not None and msg.expires_ms <= now:
                self._expire(msg)
                continue
            return msg
        return None

    def _lock(self, msg: StoredMessage, now: int, owner: object) -> None:
        token = uuid.uuid4()
        msg.lock_token = token
        msg.lock_owner = owner
        msg.locked_until_ms = now + self.lock_duration_ms
        self.locks[token] = msg
        msg.lock_timer = self.namespace.call_at_ms(msg.locked_until_ms, self._lock_expired, token)

    def _unlock(self, msg: StoredMessage) -> None:
        if msg.lock_token is not None:
            self.locks.pop(msg.lock_token, None)
        if msg.lock_timer is not None:
            msg.lock_timer.cancel()
        msg.lock_token = None
        msg.lock_timer = None
        msg.lock_owner = None

    def _lock_expired(self, token: uuid.UUID) -> None:
        msg = self.locks.get(token)
        if msg is not None:
            self._failed_delivery(msg)

    def locked(self, token: uuid.UUID) -> StoredMessage:
        """The message holding lock ``token``, or the lock-lost error Azure gives."""
        msg = self.locks.get(token)
        if msg is None or msg.locked_until_ms <= self.namespace.now_ms():
            raise lock_lost()
        return msg

    # ------------------------------------------------------------------------------------------ settlement

    def complete(self, token: uuid.UUID) -> None:
        msg = self.locked(token)
        with self.namespace.store.transaction():
            self._remove(msg)

    def abandon(self, token: uuid.UUID) -> None:
        self._failed_delivery(self.locked(token))

    def release(self, token: uuid.UUID) -> None:
        """Give a message back without counting a delivery (the SDK releases prefetched messages it never
        handed to the application)."""
        msg = self.locks.get(token)
        if msg is None:
            return
        self._unlock(msg)
        self._make_available(msg)
        self.dispatch()

    def defer(self, token: uuid.UUID) -> None:
        msg = self.locked(token)
        self._unlock(msg)
        msg.state = MessageState.DEFERRED
        with self.namespace.store.transaction():
            self.namespace.store.update_state(self.key, msg)

    def dead_letter(self, token: uuid.UUID, reason: str | None, description: str | None) -> None:
        msg = self.locked(token)
        self._unlock(msg)
        self.move_to_dead_letter(msg, reason, description)

    def renew(self, token: uuid.UUID) -> int:
        """Extend a lock by the lock duration from now; return the new expiry (ms)."""
        msg = self.locked(token)
        if msg.lock_timer is not None:
            msg.lock_timer.cancel()
        msg.locked_until_ms = self.namespace.now_ms() + self.lock_duration_ms
        msg.lock_timer = self.namespace.call_at_ms(msg.locked_until_ms, self._lock_expired, token)
        return msg.locked_until_ms

    def _failed_delivery(self, msg: StoredMessage) -> None:
        """Abandon or lock expiry: count the delivery, dead-letter past MaxDeliveryCount."""
        self._unlock(msg)
        msg.delivery_count += 1
        if self.max_delivery_count is not None and msg.delivery_count >= self.max_delivery_count:
            self.move_to_dead_letter(
                msg,
                MAX_DELIVERY_COUNT_EXCEEDED,
                f"Message could not be consumed after {self.max_delivery_count} delivery attempts.",
            )
            return
        with self.namespace.store.transaction():
            self.namespace.store.update_state(self.key, msg)
        self._make_available(msg)
        self.dispatch()

    def _remove(self, msg: StoredMessage) -> None:
        self._unlock(msg)
        msg.available = False
        if self.messages.pop(msg.sequence_number, None) is not None:
            self.size_bytes -= msg.size
            self.namespace.store.delete(self.key, (msg.sequence_number,))

    def move_to_dead_letter(self, msg: StoredMessage, reason: str | None, description: str | None) -> None:
        """Move ``msg`` to the dead-letter queue (or where dead letters are forwarded)."""
        if self.dead_letter_queue is None:
            # A dead-letter queue has no dead-letter queue of its own: the message stays where it is.
            self._make_available(msg)
            self.dispatch()
            return
        with self.namespace.store.transaction():
            self._remove(msg)
            msg.state = MessageState.ACTIVE
            msg.set_application_properties(
                {"DeadLetterReason": reason or "", "DeadLetterErrorDescription": description or ""}
            )
            self.namespace.dead_lettered(self, msg)

    def _expire(self, msg: StoredMessage) -> None:
        if self.dead_letter_on_expiration and self.dead_letter_queue is not None:
            self.move_to_dead_letter(msg, TTL_EXPIRED, "The message expired and was dead lettered.")
        else:
            with self.namespace.store.transaction():
                self._remove(msg)

    # ------------------------------------------------------------------------------------------ timers

    def on_timer(self, now: int) -> None:
        """Activate due scheduled messages and expire messages past their TTL."""
        changed = False
        with self.namespace.store.transaction():
            while self._scheduled and self._scheduled[0][0] <= now:
                _, seq = heapq.heappop(self._scheduled)
                msg = self.messages.get(seq)
                if msg is not None and msg.state is MessageState.SCHEDULED:
                    msg.state = MessageState.ACTIVE
                    self.namespace.store.update_state(self.key, msg)
                    if msg.expires_ms is not None:
                        heapq.heappush(self._expiring, (msg.expires_ms, seq))
                        self.namespace.wake_at(msg.expires_ms)
                    self._make_available(msg)
                    changed = True
            while self._expiring and self._expiring[0][0] <= now:
                _, seq = heapq.heappop(self._expiring)
                msg = self.messages.get(seq)
                # Locked messages expire only once their lock is released, deferred ones never (as in Azure).
                if msg is None or msg.lock_token is not None or msg.state is not MessageState.ACTIVE:
                    continue
                msg.available = False
                self._expire(msg)
        if changed:
            self.dispatch()

    # ------------------------------------------------------------------------------------------ browsing

    def peek(self, from_sequence: int, count: int) -> list[StoredMessage]:
        """Up to ``count`` messages from ``from_sequence`` on, in sequence order, whatever their state."""
        now = self.namespace.now_ms()
        result: list[StoredMessage] = []
        for seq in sorted(s for s in self.messages if s >= from_sequence):
            msg = self.messages[seq]
            if msg.expires_ms is not None and msg.expires_ms <= now and msg.lock_token is None:
                continue
            result.append(msg)
            if len(result) >= count:
                break
        return result

    def counts(self) -> dict[str, int]:
        """Active, scheduled and deferred message counts."""
        active = scheduled = deferred = 0
        for msg in self.messages.values():
            if msg.state is MessageState.SCHEDULED:
                scheduled += 1
            elif msg.state is MessageState.DEFERRED:
                deferred += 1
            else:
                active += 1
        return {"active": active, "scheduled": scheduled, "deferred": deferred}
