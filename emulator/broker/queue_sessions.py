"""Session operations of a message queue: locking named or next-available sessions, waiting for a
free session, renewal, expiry and session state. Mixed into :class:`MessageQueue`."""

from __future__ import annotations

import heapq
import uuid
from typing import Any

from emulator.broker import errors
from emulator.broker.errors import BrokerError
from emulator.broker.host import TimerHost
from emulator.broker.message import StoredMessage
from emulator.broker.sessions import SessionBook, SessionState, SessionWaiter


class SessionOperations:
    """Session handling for a queue or subscription that requires sessions."""

    # Provided by MessageQueue.
    namespace: TimerHost
    path: str
    key: str
    session_book: SessionBook | None
    messages: dict[int, StoredMessage]
    locks: dict[uuid.UUID, StoredMessage]
    lock_duration_ms: int

    def _failed_delivery(self, msg: StoredMessage) -> None:
        raise NotImplementedError

    def dispatch(self) -> None:
        raise NotImplementedError

    def _book(self) -> SessionBook:
        if self.session_book is None:
            raise BrokerError(
                errors.NOT_ALLOWED,
                f"The entity '{self.path}' does not require sessions; session operations are not allowed.",
                400,
            )
        return self.session_book

    def lock_session(self, session_id: str, owner: Any) -> SessionState:
        """Lock a named session for a session receiver."""
        now = self.namespace.now_ms()
        session = self._book().lock(session_id, owner, now, self.lock_duration_ms)
        self._arm_session(session)
        return session

    def acquire_next_session(self, owner: Any) -> SessionState | None:
        """Lock the free session with the oldest message, or None when there is none."""
        now = self.namespace.now_ms()
        book = self._book()
        session = book.next_free(now, self._session_has_messages)
        if session is None:
            return None
        return self.lock_session(session.session_id, owner)

    def _session_has_messages(self, session: SessionState) -> bool:
        while session.available:
            msg = self.messages.get(session.available[0])
            if msg is not None and msg.available:
                return True
            heapq.heappop(session.available)
        return False

    def wait_for_session(self, waiter: SessionWaiter) -> None:
        self._book().waiters.append(waiter)

    def _grant_waiter(self, session: SessionState) -> None:
        book = self._book()
        while book.waiters:
            waiter = book.waiters.pop(0)
            if waiter.timer is not None:
                waiter.timer.cancel()
            consumer = waiter.owner
            session.holder = consumer
            session.locked_until_ms = self.namespace.now_ms() + self.lock_duration_ms
            self._arm_session(session)
            waiter.grant(session)
            return

    def _arm_session(self, session: SessionState) -> None:
        if session.timer is not None:
            session.timer.cancel()
        session.timer = self.namespace.call_at_ms(session.locked_until_ms, self._session_expired, session)
        for msg in self.locks.values():
            if msg.session_id == session.session_id:
                msg.locked_until_ms = session.locked_until_ms

    def _session_expired(self, session: SessionState) -> None:
        if session.locked_until_ms > self.namespace.now_ms():
            return
        holder = session.holder
        self._end_session_lock(session, notify=True)
        lost = getattr(holder, "session_lost", None)
        if lost is not None:
            lost()

    def _end_session_lock(self, session: SessionState, notify: bool) -> None:
        """Release a session: its unsettled messages count a failed delivery and wait again in order."""
        book = self._book()
        book.release(session)
        held = [m for m in list(self.locks.values()) if m.session_id == session.session_id]
        for msg in sorted(held, key=lambda m: m.sequence_number):
            self._failed_delivery(msg)
        if book.waiters and self._session_has_messages(session):
            self._grant_waiter(session)
        book.forget_if_empty(session)
        if notify:
            self.dispatch()

    def renew_session(self, session_id: str) -> int:
        now = self.namespace.now_ms()
        session = self._book().held_by(session_id, None, now)
        session.locked_until_ms = now + self.lock_duration_ms
        self._arm_session(session)
        return session.locked_until_ms

    def get_session_state(self, session_id: str) -> bytes | None:
        session = self._book().held_by(session_id, None, self.namespace.now_ms())
        return session.state

    def set_session_state(self, session_id: str, state: bytes | None) -> None:
        now = self.namespace.now_ms()
        session = self._book().held_by(session_id, None, now)
        session.state = state
        session.updated_ms = now
        with self.namespace.store.transaction():
            self.namespace.store.save_session_state(self.key, session_id, state, now)

    def list_sessions(self, updated_since_ms: int | None) -> list[str]:
        """Sessions with messages or state, optionally only those updated since a time, in id order."""
        book = self._book()
        return sorted(
            s.session_id
            for s in book.sessions.values()
            if (s.message_count > 0 or s.state is not None)
            and (updated_since_ms is None or s.updated_ms >= updated_since_ms)
        )
