"""Keeping a session receiver's session locked, as azure-servicebus's ``AutoLockRenewer`` keeps a registered
``ServiceBusSession``'s: the management operation ``com.microsoft:renew-session-lock`` on
``<entity>/$management``, on a timer, for up to a maximum duration.

What goes on the wire is the SDK's request (azure-servicebus 7.15, ``_servicebus_session.py``
``ServiceBusSession.renew_lock``; ``_base_handler.py`` ``_mgmt_request_response``): the application property
``operation`` = ``com.microsoft:renew-session-lock`` and ``associated-link-name`` = the receive link's name,
a body map ``{"session-id": <id>}``; status 200 answers the new lock expiry as ``expiration`` (a timestamp).

When it renews is the SDK's too (``_common/auto_lock_renewer.py``): when the lock has ``renew_period``
seconds or less left, 10 by default, or three quarters of the first lock's whole seconds when it is that
short (``register``: ``SHORT_RENEW_OFFSET``, ``SHORT_RENEW_SCALING_FACTOR``); never past
``max_lock_renewal_duration`` from when the session was taken (then the lock is let expire). A renewal that
fails ends the renewing and is kept (:attr:`SessionLock.error`), as the SDK's ``auto_renew_error``.

A proton connection is not thread-safe: the renewing thread uses it only while it holds the receiver's
``wire`` lock, which the receiver holds for every use of its own, and between renewals it lets the
connection process its I/O every :data:`KEEP_ALIVE_SECONDS`, so the broker sees a live connection while the
caller's handlers run (the SDK's client sends its own keep-alive every 30 s).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import proton
from proton.reactor import ReceiverOption
from proton.utils import BlockingConnection

from shared.amqp.connection import WireError, management_request, reply_status
from shared.envelope.properties import timestamp_from_ms

log = logging.getLogger(__name__)

RENEW_OPERATION = "com.microsoft:renew-session-lock"
RENEW_PERIOD_SECONDS = 10.0
"""Renew when the lock has this much left (the SDK's ``AutoLockRenewer._renew_period``)."""
SHORT_RENEW_OFFSET = 0.5
SHORT_RENEW_SCALING_FACTOR = 0.75
MAX_LOCK_RENEWAL_SECONDS = 600.0
"""How long a session is kept locked at most (what Busbar registered with ``AutoLockRenewer`` before)."""
KEEP_ALIVE_SECONDS = 15.0
CHECK_SECONDS = 0.5
"""The shortest pause between two looks at the lock (the SDK's ``AutoLockRenewer._sleep_time``)."""
PUMP_SECONDS = 0.05


SESSION_FILTER = proton.symbol("com.microsoft:session-filter")
TIMEOUT_PROPERTY = proton.symbol("com.microsoft:timeout")
LOCKED_UNTIL_UTC = proton.symbol("com.microsoft:locked-until-utc")
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
DOTNET_EPOCH_TICKS = 621_355_968_000_000_000
""".NET ticks (100 ns) at the Unix epoch: ``locked-until-utc`` is a .NET ``DateTime``'s ticks."""


class SessionCannotBeLocked(WireError):
    """The session is held by another receiver (Service Bus refuses the attach with
    ``com.microsoft:session-cannot-be-locked``; azure-servicebus raises ``SessionCannotBeLockedError``)."""


class SessionLockLost(WireError):
    """The session's lock was lost (a renewal refused, or let expire): the receiver cannot settle or
    receive in it any more."""


class SessionFilter(ReceiverOption):
    """The receive link's source filter that asks for one session: ``com.microsoft:session-filter`` = the
    session id, a string, or null for the next session Service Bus has free, which it then waits up to
    ``wait_seconds`` for (the attach property ``com.microsoft:timeout`` in milliseconds) (azure-servicebus
    7.15, ``_transport/_pyamqp_transport.py`` ``create_source``, ``_servicebus_receiver.py``
    ``_create_handler``; ``_common/constants.py`` ``SESSION_FILTER``)."""

    def __init__(self, session_id: str | None, wait_seconds: float | None = None) -> None:
        self.session_id = session_id
        self.wait_seconds = wait_seconds

    def apply(self, link: proton.Link) -> None:
        link.source.filter.put_dict({SESSION_FILTER: self.session_id})
        if self.session_id is None and self.wait_seconds is not None:
            link.properties = {TIMEOUT_PROPERTY: proton.uint(int(self.wait_seconds * 1000))}


def granted_session_id(link: proton.Link) -> str | None:
    """The session Service Bus locked for a receive link, from the source filter of its attach answer."""
    filters = link.remote_source.filter
    filters.rewind()
    if filters.next() is None:
        return None
    granted = filters.get_object()
    value = granted.get(SESSION_FILTER) if isinstance(granted, dict) else None
    return None if value is None else str(value)


def locked_until_of(link: proton.Link) -> datetime:
    """When the session's lock expires, from the attach Service Bus answers: its link property
    ``com.microsoft:locked-until-utc`` in .NET ticks, as the SDK reads it (``_pyamqp_transport.py``
    ``on_attach``); now when absent, so the first renewal comes at once and learns it."""
    properties: dict[object, object] = dict(link.remote_properties or {})
    ticks = properties.get(LOCKED_UNTIL_UTC)
    if not isinstance(ticks, int):
        return datetime.now(UTC)
    return timestamp_from_ms((ticks - DOTNET_EPOCH_TICKS) // 10_000)


def renew_period(lock_left: timedelta) -> float:
    """Seconds before the lock's expiry at which it is renewed, given the first lock's time left (the
    SDK's heuristic for a lock duration shorter than its renew period)."""
    if lock_left <= timedelta(seconds=RENEW_PERIOD_SECONDS + SHORT_RENEW_OFFSET):
        # The SDK's task takes ``renew_period_override or self._renew_period``: a zero override is 10 s.
        return max(lock_left, timedelta(0)).seconds * SHORT_RENEW_SCALING_FACTOR or RENEW_PERIOD_SECONDS
    return RENEW_PERIOD_SECONDS


class SessionLock:
    """The lock of session ``session_id`` on ``entity``, held by the receive link ``link_name`` of
    ``connection``: renewed on a thread from :meth:`start` until :meth:`stop`. ``refresh_token``, when given,
    is called before each renewal (under the wire lock) to put a fresh CBS token if the connection's is near
    its expiry: azure-servicebus 7.15 refreshes its token on each management request (``_pyamqp/client.py``
    ``mgmt_request`` calls ``auth_complete``), so a session receiver left unused while its lock is renewed
    keeps its token, and Service Bus does not close its link when the first token expires."""

    def __init__(
        self,
        connection: BlockingConnection,
        wire: threading.RLock,
        entity: str,
        session_id: str,
        link_name: str,
        locked_until: datetime,
        max_duration: float = MAX_LOCK_RENEWAL_SECONDS,
        refresh_token: Callable[[], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self.locked_until = locked_until
        self.error: Exception | None = None
        """Why renewing stopped early (Service Bus refused a renewal, the connection failed), or None."""
        self._connection = connection
        self._wire = wire
        self._entity = entity
        self._link_name = link_name
        self._refresh_token = refresh_token
        self._taken = datetime.now(UTC)
        self._max_duration = timedelta(seconds=max_duration)
        self._period = timedelta(seconds=renew_period(locked_until - self._taken))
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"busbar-session-lock-{session_id}", daemon=True
        )

    def start(self) -> None:
        """Start renewing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (the caller then holds the wire lock no longer than its own use of it)."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def renew(self) -> datetime:
        """Renew the lock now; the new expiry. Raises :class:`WireError` when Service Bus refuses (the
        lock was lost: another receiver may hold the session now)."""
        with self._wire:
            if self._refresh_token is not None:
                self._refresh_token()
            reply = management_request(
                self._connection,
                self._entity,
                RENEW_OPERATION,
                {"session-id": self.session_id},
                self._link_name,
            )
        status, description = reply_status(reply)
        expiration = reply.body.get("expiration") if isinstance(reply.body, dict) else None
        if status != 200 or expiration is None:
            raise WireError(
                f"renewing the lock of session {self.session_id!r} refused ({status}): {description}"
            )
        self.locked_until = timestamp_from_ms(int(expiration))
        return self.locked_until

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                now = datetime.now(UTC)
                if now - self._taken >= self._max_duration:
                    log.debug(
                        "session %s: kept locked %s; its lock is let expire",
                        self.session_id,
                        now - self._taken,
                    )
                    return
                if now >= self.locked_until - self._period:
                    self.renew()
                else:
                    self._pump()
                due = self.locked_until - self._period - datetime.now(UTC)
                if self._stopping.wait(min(max(due.total_seconds(), CHECK_SECONDS), KEEP_ALIVE_SECONDS)):
                    return
        except Exception as error:  # kept for the receiver, which refuses further use with it
            log.warning("session %s: renewing its lock failed: %s", self.session_id, error)
            self.error = error

    def _pump(self) -> None:
        """Let the connection process its I/O once (heartbeats, the broker's frames)."""
        with self._wire, contextlib.suppress(proton.Timeout):
            self._connection.wait(_once(), timeout=PUMP_SECONDS)


def _once() -> Callable[[], bool]:
    """A condition false the first time it is asked and true after: one turn of the connection's loop."""
    asked = iter((False,))
    return lambda: next(asked, True)


__all__ = [
    "MAX_LOCK_RENEWAL_SECONDS",
    "RENEW_OPERATION",
    "SESSION_CANNOT_BE_LOCKED",
    "SESSION_LOCK_LOST",
    "SessionCannotBeLocked",
    "SessionFilter",
    "SessionLock",
    "SessionLockLost",
    "granted_session_id",
    "locked_until_of",
    "renew_period",
]
