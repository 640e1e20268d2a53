"""A message queue: the storage and delivery engine behind a queue, a subscription or a dead-letter
sub-queue. Peek-lock, lock expiry, abandon, defer, dead-letter, TTL expiry and competing consumers."""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from emulator.broker import errors
from emulator.broker.errors import BrokerError, lock_lost
from emulator.broker.host import TimerHost
from emulator.broker.message import SCHEDULED_ENQUEUE_TIME, MessageState, StoredMessage
from emulator.broker.queue_sessions import SessionOperations
from emulator.broker.sessions import SessionBook, SessionState

MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"


class Consumer(Protocol):
    """A receiving link as the queue sees it."""

    receive_and_delete: bool
    # The session this consumer holds, for session receivers.
    message_session: SessionState | None

    def credit(self) -> int: ...

    def deliver(self, message: StoredMessage, settled: bool) -> None: ...

    def session_lost(self) -> None: ...

    def entity_deleted(self) -> None: ...


class QueueHost(TimerHost, Protocol):
    """What a queue needs of its namespace (implemented by :class:`~emulator.broker.namespace.Namespace`)."""

    def wake_at(self, when_ms: int, queue: MessageQueue | None = None) -> None:
        """Have the timer sweep visit ``queue`` (every queue when ``None``) at ``when_ms``."""
        ...

    def dead_lettered(self, source: MessageQueue, msg: StoredMessage) -> None:
        """``msg`` of ``source`` was dead-lettered; place it (inside the caller's store transaction)."""
        ...


class MessageQueue(SessionOperations):
    """One ordered store of messages with its consumers and locks."""

    def __init__(
        self,
        namespace: QueueHost,
        path: str,
        *,
        lock_duration_ms: int,
        max_delivery_count: int | None,
        default_ttl_ms: int | None,
        dead_letter_on_expiration: bool,
        dead_letter_queue: MessageQueue | None,
        requires_session: bool = False,
    ) -> None:
        self.namespace: QueueHost = namespace  # narrows SessionOperations' TimerHost
        self.path = path
        self.key = path.lower()
        self.lock_duration_ms = lock_duration_ms
        self.max_delivery_count = max_delivery_count
        self.default_ttl_ms = default_ttl_ms
        self.dead_letter_on_expiration = dead_letter_on_expiration
        self.dead_letter_queue = dead_letter_queue
        self.session_book = SessionBook() if requires_session else None
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
        # When set, a due scheduled message is handed here instead of becoming available (topics).
        self.on_activate: Callable[[StoredMessage], None] | None = None
        # The entity this queue belongs to (set by the entity), for routing dead letters.
        self.owner: object | None = None

    def configure(self, props: Any) -> None:
        """Apply updated entity properties (lock duration, delivery count, TTL, expiry handling)."""
        self.lock_duration_ms = int(props.lock_duration.total_seconds() * 1000)
        self.max_delivery_count = props.max_delivery_count
        ttl = props.default_message_time_to_live
        self.default_ttl_ms = None if ttl is None else int(ttl.total_seconds() * 1000)
        self.dead_letter_on_expiration = props.dead_lettering_on_message_expiration

    # ------------------------------------------------------------------------------------------ loading

    def restore(self) -> None:
        """Load this queue's messages (and session states) from the store (start-up)."""
        store = self.namespace.store
        self.last_sequence = store.last_sequence(self.key)
        now = self.namespace.now_ms()
        if self.session_book is not None:
            for session_id, state, updated_ms in store.session_states(self.key):
                session = self.session_book.get(session_id)
                session.state, session.updated_ms = state, updated_ms
        for row in store.load(self.key):
            msg = StoredMessage.from_store(row[7], *row[:7])
            self._add(msg)
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
            self._add(msg)
            self._track(msg, now)

    def prepare(self, msg: StoredMessage, now: int, ttl_ceiling_ms: int | None = None) -> None:
        """Fill in broker fields of a message about to be accepted into this queue.

        ``ttl_ceiling_ms`` is a further default that governs the message (its topic's, for a subscription)."""
        msg.sequence_number = self.next_sequence()
        msg.enqueued_ms = now
        ceiling = _earliest(self.default_ttl_ms, ttl_ceiling_ms)
        ttl = msg.ttl_ms
        if ceiling is not None:
            # The entity default is the TTL of a message sent without one (its header stays unset, as in
            # Azure) and a ceiling for one sent with a longer TTL (silently adjusted: the receiver sees it).
            msg.set_ttl(ceiling)
            ttl = ceiling if ttl is None else min(ttl, ceiling)
        scheduled = msg.parsed.message_annotations.get(SCHEDULED_ENQUEUE_TIME)
        if scheduled is not None and int(scheduled) > now:
            msg.state = MessageState.SCHEDULED
            msg.scheduled_ms = int(scheduled)
        start = msg.scheduled_ms if msg.scheduled_ms is not None else now
        msg.expires_ms = None if ttl is None else start + ttl

    def _add(self, msg: StoredMessage) -> None:
        self.messages[msg.sequence_number] = msg
        self.size_bytes += msg.size
        if self.session_book is not None and msg.session_id is not None:
            session = self.session_book.get(msg.session_id)
            session.message_count += 1
            session.updated_ms = max(session.updated_ms, msg.enqueued_ms)

    def _track(self, msg: StoredMessage, now: int) -> None:
        if msg.state is MessageState.SCHEDULED and msg.scheduled_ms is not None:
            heapq.heappush(self._scheduled, (msg.scheduled_ms, msg.sequence_number))
            self.namespace.wake_at(msg.scheduled_ms, self)
            return
        if msg.expires_ms is not None:
            heapq.heappush(self._expiring, (msg.expires_ms, msg.sequence_number))
            self.namespace.wake_at(msg.expires_ms, self)
        if msg.state is MessageState.ACTIVE:
            self._make_available(msg)

    def _make_available(self, msg: StoredMessage) -> None:
        if msg.available:
            return
        msg.available = True
        if self.session_book is not None and msg.session_id is not None:
            session = self.session_book.push(msg.session_id, msg.sequence_number)
            if self.session_book.waiters and not session.locked(self.namespace.now_ms()):
                self._grant_waiter(session)
        else:
            heapq.heappush(self._available, msg.sequence_number)

    # ------------------------------------------------------------------------------------------ delivery

    def attach(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def detach(self, consumer: Consumer, release_session: bool = True) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        session = consumer.message_session
        if release_session and session is not None and session.holder is consumer:
            # Closing a session receiver gives the session up; what it held unsettled counts as a delivery.
            self._end_session_lock(session, notify=False)
        if self.session_book is not None:
            self.session_book.waiters = [w for w in self.session_book.waiters if w.owner is not consumer]

    def dispatch(self) -> None:
        """Hand available messages to consumers with credit, round-robin."""
        if self._dispatching or not self.consumers:
            return
        self._dispatching = True
        try:
            now = self.namespace.now_ms()
            exhausted: set[int] = set()
            while True:
                consumer = self._next_consumer(exhausted)
                if consumer is None:
                    return
                if not self._feed(consumer, now):
                    exhausted.add(id(consumer))
        finally:
            self._dispatching = False

    def _feed(self, consumer: Consumer, now: int) -> bool:
        """Deliver to one consumer until its credit or its messages run out; True if it got any."""
        got = False
        while consumer.credit() > 0:
            msg = self._pop_available(consumer, now)
            if msg is None:
                break
            got = True
            if consumer.receive_and_delete:
                with self.namespace.store.transaction():
                    self._remove(msg)
                consumer.deliver(msg, True)
            else:
                self._lock(msg, now, consumer)
                consumer.deliver(msg, False)
            if len(self.consumers) > 1:
                break  # round-robin between competing consumers
        return got

    def _next_consumer(self, exhausted: set[int]) -> Consumer | None:
        consumers = self.consumers
        count = len(consumers)
        for i in range(count):
            consumer = consumers[(self._rotation + i) % count]
            if id(consumer) in exhausted:
                continue
            has_session = self.session_book is None or consumer.message_session is not None
            if consumer.credit() > 0 and has_session and self._has_work(consumer):
                self._rotation = (self._rotation + i + 1) % count
                return consumer
        return None

    def _has_work(self, consumer: Consumer) -> bool:
        session = consumer.message_session
        return bool(session.available if session is not None else self._available)

    def _pop_available(self, consumer: Consumer, now: int) -> StoredMessage | None:
        session = consumer.message_session
        if session is not None and (session.holder is not consumer or not session.locked(now)):
            return None
        heap = session.available if session is not None else self._available
        while heap:
            seq = heapq.heappop(heap)
            msg = self.messages.get(seq)
            if msg is None or not msg.available:
                continue
            msg.available = False
            if msg.expires_ms is not None and msg.expires_ms <= now:
                self._expire(msg)
                continue
            return msg
        return None

    def _lock(self, msg: StoredMessage, now: int, owner: Consumer | object) -> None:
        token = uuid.uuid4()
        msg.lock_token = token
        msg.lock_owner = owner
        self.locks[token] = msg
        session = self._session_of(msg)
        if session is not None and session.holder is not None:
            # A session message is locked by its session's lock, not a lock of its own.
            msg.locked_until_ms = session.locked_until_ms
            return
        msg.locked_until_ms = now + self.lock_duration_ms
        msg.lock_timer = self.namespace.call_at_ms(msg.locked_until_ms, self._lock_expired, token)

    def _session_of(self, msg: StoredMessage) -> SessionState | None:
        if self.session_book is None or msg.session_id is None:
            return None
        return self.session_book.sessions.get(msg.session_id)

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

    def locked(self, token: uuid.UUID, session_id: str | None = None) -> StoredMessage:
        """The message holding lock ``token``, or the lock-lost error Azure gives."""
        msg = self.locks.get(token)
        now = self.namespace.now_ms()
        if msg is not None and self.session_book is not None and msg.session_id is not None:
            self.session_book.held_by(msg.session_id, None, now)
            if session_id is not None and session_id != msg.session_id:
                raise lock_lost()
            return msg
        if msg is None and session_id is not None and self.session_book is not None:
            self.session_book.held_by(session_id, None, now)
        if msg is None or msg.locked_until_ms <= now:
            raise lock_lost()
        return msg

    # ------------------------------------------------------------------------------------------ settlement

    def complete(self, token: uuid.UUID, session_id: str | None = None) -> None:
        msg = self.locked(token, session_id)
        with self.namespace.store.transaction():
            self._remove(msg)

    def abandon(self, token: uuid.UUID, session_id: str | None = None) -> None:
        self._failed_delivery(self.locked(token, session_id))

    def release(self, token: uuid.UUID) -> None:
        """Give a message back without counting a delivery (the SDK releases prefetched messages it never
        handed to the application)."""
        msg = self.locks.get(token)
        if msg is None:
            return
        self._unlock(msg)
        if msg.state is MessageState.ACTIVE:
            self._make_available(msg)
        self.dispatch()

    def defer(self, token: uuid.UUID, session_id: str | None = None) -> None:
        msg = self.locked(token, session_id)
        self._unlock(msg)
        msg.state = MessageState.DEFERRED
        with self.namespace.store.transaction():
            self.namespace.store.update_state(self.key, msg)

    def dead_letter(
        self, token: uuid.UUID, reason: str | None, description: str | None, session_id: str | None = None
    ) -> None:
        msg = self.locked(token, session_id)
        self._unlock(msg)
        self.move_to_dead_letter(msg, reason, description)

    def renew(self, token: uuid.UUID) -> int:
        """Extend a lock by the lock duration from now; return the new expiry (ms)."""
        msg = self.locked(token)
        if self._session_of(msg) is not None:
            raise BrokerError(
                errors.NOT_ALLOWED, "Renewing a message lock is not supported for messages of a session.", 400
            )
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
        if msg.state is MessageState.ACTIVE:
            self._make_available(msg)
            self.dispatch()

    def _remove(self, msg: StoredMessage) -> None:
        self._unlock(msg)
        msg.available = False
        if self.messages.pop(msg.sequence_number, None) is not None:
            self.size_bytes -= msg.size
            self.namespace.store.delete(self.key, (msg.sequence_number,))
            session = self._session_of(msg)
            if session is not None:
                session.message_count -= 1
                assert self.session_book is not None
                self.session_book.forget_if_empty(session)

    def move_to_dead_letter(self, msg: StoredMessage, reason: str | None, description: str | None) -> None:
        """Move ``msg`` to the dead-letter queue (or where dead letters are forwarded)."""
        if self.dead_letter_queue is None:
            # A dead-letter queue has no dead-letter queue of its own: the message stays where it is.
            if msg.state is MessageState.ACTIVE:
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
        due = self.next_due()
        if due is None or due > now:
            return  # nothing due: no store transaction (the sweep visits every queue of the namespace)
        changed = False
        with self.namespace.store.transaction():
            while self._scheduled and self._scheduled[0][0] <= now:
                _, seq = heapq.heappop(self._scheduled)
                msg = self.messages.get(seq)
                if msg is not None and msg.state is MessageState.SCHEDULED:
                    self._activate(msg, now)
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

    def next_due(self) -> int | None:
        """When this queue next needs its timer: the earliest scheduled activation or TTL expiry."""
        times = [heap[0][0] for heap in (self._scheduled, self._expiring) if heap]
        return min(times) if times else None

    def _activate(self, msg: StoredMessage, now: int) -> None:
        """A scheduled message becomes active: it is appended as if enqueued now, with a new sequence
        number, as Azure does."""
        store = self.namespace.store
        self.messages.pop(msg.sequence_number, None)
        self.size_bytes -= msg.size
        session = self._session_of(msg)
        if session is not None:
            session.message_count -= 1
        store.delete(self.key, (msg.sequence_number,))
        if self.on_activate is not None:
            self.on_activate(msg)
            return
        msg.state = MessageState.ACTIVE
        msg.sequence_number = self.next_sequence()
        msg.enqueued_ms = now
        self.accept([msg])

    # ------------------------------------------------------------------------------------------ scheduling

    def cancel_scheduled(self, sequence_numbers: list[int]) -> None:
        """Remove scheduled messages; an unknown or no longer scheduled number is an error and nothing
        changes."""
        found = [self.messages.get(seq) for seq in sequence_numbers]
        for seq, msg in zip(sequence_numbers, found, strict=True):
            if msg is None or msg.state is not MessageState.SCHEDULED:
                raise BrokerError(
                    errors.MESSAGE_NOT_FOUND,
                    f"The scheduled message with sequence number {seq} was not found "
                    "or is no longer scheduled.",
                    404,
                )
        with self.namespace.store.transaction():
            for msg in found:
                assert msg is not None
                self._remove(msg)

    # ------------------------------------------------------------------------------------------ deferral

    def receive_deferred(
        self, sequence_numbers: list[int], owner: object, receive_and_delete: bool, session_id: str | None
    ) -> list[StoredMessage]:
        """Lock (or remove) deferred messages by sequence number."""
        now = self.namespace.now_ms()
        if session_id is not None and self.session_book is not None:
            self.session_book.held_by(session_id, None, now)
        messages = []
        for seq in sequence_numbers:
            msg = self.messages.get(seq)
            if (
                msg is None
                or msg.state is not MessageState.DEFERRED
                or msg.lock_token is not None
                or (session_id is not None and msg.session_id != session_id)
            ):
                raise BrokerError(
                    errors.MESSAGE_NOT_FOUND,
                    f"Failed to lock one or more specified messages. The message with sequence number {seq} "
                    "does not exist or is not deferred.",
                    404,
                )
            messages.append(msg)
        result = []
        for msg in messages:
            if msg.expires_ms is not None and msg.expires_ms <= now:
                self._expire(msg)
                continue
            if receive_and_delete:
                with self.namespace.store.transaction():
                    self._remove(msg)
            else:
                self._lock(msg, now, owner)
            result.append(msg)
        return result

    # ------------------------------------------------------------------------------------------ browsing

    def peek(self, from_sequence: int, count: int, session_id: str | None = None) -> list[StoredMessage]:
        """Up to ``count`` messages from ``from_sequence`` on, in sequence order, whatever their state."""
        now = self.namespace.now_ms()
        result: list[StoredMessage] = []
        for seq in sorted(s for s in self.messages if s >= from_sequence):
            msg = self.messages[seq]
            if session_id is not None and msg.session_id != session_id:
                continue
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


def _earliest(first: int | None, second: int | None) -> int | None:
    """The smaller of two optional durations (None is infinite)."""
    if first is None:
        return second
    return first if second is None else min(first, second)
