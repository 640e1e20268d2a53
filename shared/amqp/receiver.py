"""Receiving, peeking and settling a queue's, subscription's or sub-queue's messages over AMQP with
python-qpid-proton's public API, every application property with its AMQP type (:mod:`shared.amqp.values`)
and each received message with the bytes it came as.

What goes on the wire is what azure-servicebus 7.15 sends for the same calls:

* receive (peek-lock): a receive link on the address; credit for the batch, the first message awaited up to
  the wait, then the rest of the credit drained, so nothing more is locked behind the caller's back;
* complete, abandon, defer, dead-letter: the outcomes of :mod:`shared.amqp.deliveries`, each answer awaited,
  so a lost lock raises :class:`WireError`;
* peek: the management operation ``com.microsoft:peek-message`` on ``<address>/$management`` (no lock),
  whose response carries each message's own AMQP encoding; a message's lock renewed with
  ``com.microsoft:renew-lock`` (``_servicebus_receiver.py`` ``_renew_locks``);
* one session (a queue or subscription that requires sessions): the receive link attached at once with the
  source filter ``com.microsoft:session-filter`` = the session id, or null for the next session Service Bus
  has free (waited for up to ``session_wait``, the attach property ``com.microsoft:timeout``), so the session
  is taken when the receiver opens, or :class:`~shared.amqp.session_lock.SessionCannotBeLocked` says another
  receiver holds it, or :class:`NoSessionAvailable` that none came free; its lock renewed while the receiver
  is open (:mod:`shared.amqp.session_lock`, as the SDK's ``AutoLockRenewer``), its state read and set with
  ``com.microsoft:get-session-state`` / ``set-session-state``.

A receiver kept open puts a fresh token before the one it put expires (:data:`TOKEN_REFRESH_SECONDS`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

import proton
from proton.utils import LinkDetached

from shared.amqp.connection import (
    CONNECT_TIMEOUT,
    Namespace,
    WireError,
    management_request,
    reply_status,
)
from shared.amqp.deliveries import (
    ABANDON,
    COMPLETE,
    DEFER,
    Deliveries,
    Outcome,
    dead_letter,
    delivery_tag,
    settle_all,
)
from shared.amqp.received import ReceivedMessage, received_message
from shared.amqp.session_lock import (
    MAX_LOCK_RENEWAL_SECONDS,
    SESSION_CANNOT_BE_LOCKED,
    SESSION_LOCK_LOST,
    SessionCannotBeLocked,
    SessionFilter,
    SessionLock,
    SessionLockLost,
    granted_session_id,
    locked_until_of,
)
from shared.envelope.properties import timestamp_from_ms

log = logging.getLogger(__name__)


class NextAvailableSession:
    """The type of :data:`NEXT_AVAILABLE_SESSION`."""


NEXT_AVAILABLE_SESSION = NextAvailableSession()
"""``session_id`` for whichever session Service Bus has free (azure-servicebus's ``NEXT_AVAILABLE_SESSION``):
the session filter sent without a value; the session granted is read from the attach's answer."""


class NoSessionAvailable(WireError):
    """No session came free within the wait (Service Bus refuses the attach with ``com.microsoft:timeout``;
    azure-servicebus raises ``OperationTimeoutError``)."""


TIMEOUT_CONDITION = "com.microsoft:timeout"
TOKEN_REFRESH_SECONDS = 300.0
"""A kept connection puts a fresh token this long before its token expires (the SDK refreshes its CBS token
before expiry as well): a trigger listener's receiver stays open for hours."""
MORE_MESSAGES_WAIT = 0.2
"""After the first message of a batch, how long a receive waits for the rest before it drains its credit."""
_RECEIPTS = itertools.count(1)
"""Receipts for every receiver of the process, so that one receiver never takes another's message for one
of its own (``next`` on a count is atomic under the GIL)."""


class EntityReceiver:
    """A peek-lock receiver on one ``address`` (``<queue>``, ``<topic>/subscriptions/<name>``, either's
    ``/$deadletterqueue`` or ``/$Transfer/$deadletterqueue``), of one ``session_id`` when given (the entity
    requires sessions; the session is locked from here to :meth:`close`). A context manager; one caller
    thread at a time (its session lock's renewing thread shares the connection under ``_wire``)."""

    def __init__(
        self,
        namespace: Namespace,
        address: str,
        session_id: str | NextAvailableSession | None = None,
        *,
        session_wait: float | None = None,
        lock_renewal_seconds: float = MAX_LOCK_RENEWAL_SECONDS,
    ) -> None:
        """Open the connection (and, for a session, take the session: ``NEXT_AVAILABLE_SESSION`` waits up
        to ``session_wait`` seconds for a free one, else :class:`NoSessionAvailable`; its lock is renewed
        for up to ``lock_renewal_seconds``)."""
        self.address = address
        self._namespace = namespace
        self._connection, self._token_expiry = namespace.connect_until(address)
        self._wire = threading.RLock()  # every use of the connection: the caller's and the lock renewer's
        self._deliveries = Deliveries()
        self._blocking: Any = None  # proton's BlockingReceiver: it unsets the link's handler when collected
        self._locked: dict[int, proton.Delivery] = {}  # by receipt (ReceivedMessage.receipt)
        self.session: SessionLock | None = None
        self.session_id: str | None = None
        """The session this receiver holds (the one Service Bus granted, for the next available)."""
        if session_id is not None:
            wanted = None if isinstance(session_id, NextAvailableSession) else session_id
            self.session = self._take_session(wanted, session_wait, lock_renewal_seconds)
            self.session_id = self.session.session_id
            self.session.start()

    def _take_session(self, wanted: str | None, wait: float | None, renewal: float) -> SessionLock:
        which = "the next available session" if wanted is None else f"session {wanted!r}"
        try:
            link = self._receive_link(SessionFilter(wanted, wait))
            session_id = granted_session_id(link) if wanted is None else wanted
            if session_id is None:
                raise WireError(f"Service Bus granted {self.address} no session id")
        except LinkDetached as refused:
            self._connection.close()
            kind = {SESSION_CANNOT_BE_LOCKED: SessionCannotBeLocked, TIMEOUT_CONDITION: NoSessionAvailable}
            raise kind.get(refused.condition or "", WireError)(
                f"{which} of {self.address} cannot be taken: {refused}", refused.condition
            ) from None
        except BaseException:
            self._connection.close()
            raise
        return SessionLock(
            self._connection,
            self._wire,
            self.address,
            session_id,
            link.name,
            locked_until_of(link),
            max_duration=renewal,
            refresh_token=self._refresh_token,
        )

    def _check_usable(self) -> None:
        detached = self._deliveries.detached
        if detached is not None:
            lost = self.session is not None and detached.name == SESSION_LOCK_LOST
            raise (SessionLockLost if lost else WireError)(
                f"Service Bus closed the link to {self.address}: {detached}", detached.name
            )
        if self.session is not None and self.session.error is not None:
            raise SessionLockLost(
                f"the lock of session {self.session_id!r} of {self.address} was lost: {self.session.error}"
            )
        self._refresh_token()

    def _refresh_token(self) -> None:
        """Put a fresh token on the connection when its token is within ``TOKEN_REFRESH_SECONDS`` of its
        expiry (at each use, and before each renewal of the session's lock, from its renewing thread)."""
        with self._wire:
            if time.time() >= self._token_expiry - TOKEN_REFRESH_SECONDS:
                self._token_expiry = self._namespace.authorize(self._connection, self.address)

    def __enter__(self) -> EntityReceiver:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------- receive

    def _receive_link(self, session: SessionFilter | None = None) -> Any:
        if self._blocking is None:
            self._blocking = self._connection.create_receiver(
                self.address,
                credit=0,
                handler=self._deliveries,
                name=f"busbar-{uuid.uuid4()}",
                options=session,
            )
        return self._blocking.link

    def receive_messages(
        self, max_message_count: int = 1, max_wait_time: float = 5.0, rest_wait: float = MORE_MESSAGES_WAIT
    ) -> list[ReceivedMessage]:
        """Up to ``max_message_count`` messages, locked; waits up to ``max_wait_time`` seconds for the first
        (an empty list when none came), then up to ``rest_wait`` for the rest (0: only what Service Bus
        hands over at once)."""
        with self._wire:
            return self._receive(max_message_count, max_wait_time, rest_wait)

    def _receive(
        self, max_message_count: int, max_wait_time: float, rest_wait: float
    ) -> list[ReceivedMessage]:
        self._check_usable()
        link = self._receive_link()
        arrived = self._deliveries.arrived
        link.flow(max(1, max_message_count - len(arrived) - link.credit))
        detached = self._deliveries
        self._wait(lambda: bool(arrived) or detached.detached is not None, max_wait_time)
        if arrived and rest_wait > 0:
            self._wait(lambda: len(arrived) >= max_message_count, rest_wait)
        self._check_usable()
        if link.credit > 0:  # credit left: drained (a round trip), so nothing more is locked unasked
            link.drain(0)
            self._wait(lambda: not link.draining() or detached.detached is not None, CONNECT_TIMEOUT)
        batch: list[ReceivedMessage] = []
        while arrived and len(batch) < max_message_count:
            message, delivery, encoded = arrived.popleft()
            # Settled later by this receipt, which names the delivery kept here (unique in the process).
            receipt = next(_RECEIPTS)
            self._locked[receipt] = delivery
            tag = delivery_tag(delivery)
            batch.append(received_message(message, receipt=receipt, amqp_bytes=encoded, delivery_tag=tag))
        return batch

    def _wait(self, condition: Any, timeout: float) -> None:
        with contextlib.suppress(proton.Timeout):  # a wait that ends without the condition is an answer too
            self._connection.wait(condition, timeout=timeout)

    # ----------------------------------------------------------------------------------------- settle

    def complete_message(self, message: ReceivedMessage) -> None:
        """Remove ``message`` from its entity (``accepted``)."""
        self._settle(message, COMPLETE)

    def abandon_message(self, message: ReceivedMessage) -> None:
        """Give ``message`` back, unlocked, its delivery count raised (``modified``, delivery failed)."""
        self._settle(message, ABANDON)

    def defer_message(self, message: ReceivedMessage) -> None:
        """Set ``message`` aside, to be received by sequence number only (``modified``, undeliverable
        here)."""
        self._settle(message, DEFER)

    def dead_letter_message(
        self, message: ReceivedMessage, reason: str | None = None, error_description: str | None = None
    ) -> None:
        """Move ``message`` to its entity's dead-letter queue with ``reason`` and ``error_description``."""
        self._settle(message, dead_letter(reason, error_description))

    def _settle(self, message: ReceivedMessage, outcome: Outcome) -> None:
        error = self.settle_messages([(message, outcome)])[0]
        if error is not None:
            raise error

    def settle_messages(
        self, settlements: Sequence[tuple[ReceivedMessage, Outcome]]
    ) -> list[WireError | None]:
        """Settle each message with its outcome (:mod:`shared.amqp.deliveries`), every outcome sent before
        any answer is awaited; each one's error, or None."""
        with self._wire:
            self._check_usable()
            errors: list[WireError | None] = [None] * len(settlements)
            sent: list[int] = []
            pending: list[tuple[proton.Delivery, Outcome, str]] = []
            for index, (message, outcome) in enumerate(settlements):
                delivery = self._locked.pop(message.receipt, None) if message.receipt is not None else None
                if delivery is None:
                    errors[index] = WireError(
                        f"message {message.sequence_number} was not received locked by this receiver"
                    )
                    continue
                sent.append(index)
                pending.append((delivery, outcome, str(message.sequence_number)))
            answers = settle_all(self._connection, self._deliveries, pending, self._check_usable)
            for index, error in zip(sent, answers, strict=True):
                errors[index] = error
            return errors

    # ------------------------------------------------------------------------------------- management

    def _management(self, operation: str, body: dict[str, Any], *, linked: bool = True) -> proton.Message:
        """The entity's ``$management`` answer to ``operation`` (tied to the receive link unless not
        ``linked``), whatever its status."""
        link_name = self._blocking.link.name if linked and self._blocking is not None else None
        with self._wire:
            self._check_usable()
            return management_request(self._connection, self.address, operation, body, link_name)

    def _answer(self, reply: proton.Message, what: str, key: str) -> Any:
        status, description = reply_status(reply)
        if status != 200:
            raise WireError(f"{what} of {self.address} refused ({status}): {description}")
        return reply.body.get(key) if isinstance(reply.body, dict) else None

    def renew_message_lock(self, message: ReceivedMessage) -> datetime:
        """Renew ``message``'s lock; its new expiry (``com.microsoft:renew-lock`` with its lock token, as
        azure-servicebus 7.15 ``_servicebus_receiver.py`` ``_renew_locks`` sends it)."""
        if message.lock_token is None or message.receipt not in self._locked:
            raise WireError(f"message {message.sequence_number} is not held locked by this receiver")
        # An array of uuid, as the SDK sends it (proton's stubs type the descriptor too narrowly).
        tokens = proton.Array(proton.UNDESCRIBED, proton.Data.UUID, message.lock_token)  # type: ignore[arg-type]
        reply = self._management("com.microsoft:renew-lock", {"lock-tokens": tokens})
        expirations = self._answer(reply, f"renewing the lock of {message.sequence_number}", "expirations")
        if not expirations:
            raise WireError(f"renewing the lock of {message.sequence_number} answered no expiry")
        return timestamp_from_ms(int(next(iter(expirations))))

    def renew_session_lock(self) -> datetime:
        """Renew the session's lock now; its new expiry."""
        return self._held_session().renew()

    def get_session_state(self) -> bytes | None:
        """The session's state (``com.microsoft:get-session-state``)."""
        session = self._held_session()
        reply = self._management("com.microsoft:get-session-state", {"session-id": session.session_id})
        state = self._answer(reply, "reading the state of a session", "session-state")
        return None if state is None else bytes(state)

    def set_session_state(self, state: bytes | None) -> None:
        """Set the session's state (``com.microsoft:set-session-state``; ``None`` clears it)."""
        session = self._held_session()
        body = {"session-id": session.session_id, "session-state": None if state is None else bytes(state)}
        reply = self._management("com.microsoft:set-session-state", body)
        self._answer(reply, "setting a session's state", "session-state")

    def _held_session(self) -> SessionLock:
        if self.session is None:
            raise WireError(f"the receiver of {self.address} holds no session")
        return self.session

    def peek_messages(self, max_message_count: int = 1, sequence_number: int = 0) -> list[ReceivedMessage]:
        """Up to ``max_message_count`` messages from ``sequence_number`` on, without locking them."""
        reply = self._management(
            "com.microsoft:peek-message",
            {"from-sequence-number": int(sequence_number), "message-count": proton.int32(max_message_count)},
            linked=False,
        )
        status, description = reply_status(reply)
        if status == 204:
            return []
        if status != 200:
            raise WireError(f"peek of {self.address} refused ({status}): {description}")
        return [_peeked(entry) for entry in _entries(reply.body)]

    # ------------------------------------------------------------------------------------------ close

    def close(self) -> None:
        """Close the link and the connection (a message still locked is released by Service Bus, and so
        is the session)."""
        if self.session is not None:
            self.session.stop()
        with self._wire:
            self._locked.clear()
            self._connection.close()


def _entries(body: Any) -> Sequence[Any]:
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages if isinstance(messages, list) else []


def _peeked(entry: Any) -> ReceivedMessage:
    encoded = entry.get("message") if isinstance(entry, dict) else None
    if not isinstance(encoded, bytes | memoryview):
        raise WireError(f"a peek response entry has no message: {entry!r}")
    message = proton.Message()
    message.decode(bytes(encoded))
    return received_message(message)


__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "EntityReceiver",
    "NextAvailableSession",
    "NoSessionAvailable",
]
