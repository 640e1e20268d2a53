"""Message sessions of one session-enabled queue or subscription.

Each session keeps its own FIFO of available messages, one exclusive lock (holder, expiry) and a
durable state blob. Next-available receivers wait here until a session with messages is free.
"""

from __future__ import annotations

import heapq
from asyncio import TimerHandle
from collections.abc import Callable
from dataclasses import dataclass, field

from emulator.broker import errors
from emulator.broker.errors import BrokerError


@dataclass(slots=True, eq=False)
class SessionState:
    """One session: its waiting messages (sequence numbers), lock and state."""

    session_id: str
    available: list[int] = field(default_factory=list)
    holder: object | None = None
    locked_until_ms: int = 0
    timer: TimerHandle | None = None
    state: bytes | None = None
    updated_ms: int = 0
    message_count: int = 0

    def locked(self, now: int) -> bool:
        return self.holder is not None and self.locked_until_ms > now


@dataclass(slots=True, eq=False)
class SessionWaiter:
    """A next-available session receiver waiting for a session to become free."""

    owner: object
    grant: Callable[[SessionState], None]
    timer: TimerHandle | None = None


class SessionBook:
    """The sessions of one message queue."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionState] = {}
        self.waiters: list[SessionWaiter] = []

    def get(self, session_id: str) -> SessionState:
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = SessionState(session_id)
        return session

    def push(self, session_id: str, sequence_number: int) -> SessionState:
        session = self.get(session_id)
        heapq.heappush(session.available, sequence_number)
        return session

    def lock(self, session_id: str, owner: object, now: int, lock_ms: int) -> SessionState:
        """Lock a named session for ``owner`` (it need not have messages)."""
        session = self.get(session_id)
        if session.locked(now) and session.holder is not owner:
            raise BrokerError(
                errors.SESSION_CANNOT_BE_LOCKED,
                f"The requested session '{session_id}' cannot be accepted. "
                "It may be locked by another receiver.",
                410,
            )
        session.holder = owner
        session.locked_until_ms = now + lock_ms
        return session

    def next_free(self, now: int, has_messages: Callable[[SessionState], bool]) -> SessionState | None:
        """The unlocked session with the oldest available message, or None."""
        best: SessionState | None = None
        for session in self.sessions.values():
            if session.locked(now) or not has_messages(session):
                continue
            if best is None or session.available[0] < best.available[0]:
                best = session
        return best

    def release(self, session: SessionState) -> None:
        if session.timer is not None:
            session.timer.cancel()
        session.timer = None
        session.holder = None
        session.locked_until_ms = 0

    def held_by(self, session_id: str, owner: object | None, now: int) -> SessionState:
        """The session, if its lock is still held (by ``owner`` when given); else session-lock-lost."""
        session = self.sessions.get(session_id)
        if session is None or not session.locked(now) or (owner is not None and session.holder is not owner):
            raise BrokerError(
                errors.SESSION_LOCK_LOST,
                f"The session lock has expired on the MessageSession. Accept a new MessageSession. "
                f"Session: '{session_id}'.",
                410,
            )
        return session

    def forget_if_empty(self, session: SessionState) -> None:
        if (
            not session.available
            and session.message_count <= 0
            and session.holder is None
            and session.state is None
        ):
            self.sessions.pop(session.session_id, None)
