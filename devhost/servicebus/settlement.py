"""The host's Settlement gRPC service, through which the Service Bus binding extension settles: who holds
which message.

In Azure a function's ``ServiceBusMessageActions`` (the extension's class, a singleton) opens a gRPC channel
to the host at the worker's ``--host``/``--port`` arguments and calls ``Settlement`` (``settlement.proto``,
shipped in the extension) with the message's lock token; the host settles on the receiver that holds the
message. devhost serves that same service (:mod:`devhost.servicebus.settlement_service`, on each host's own
event loop) and starts the worker process with the same arguments (:func:`worker_arguments`), so the
extension's own client reaches it.

Each invocation registers its messages by lock token (and, for sessions, its session id) in a
:class:`SettlementRegistry`; an unknown or already-released token gets ``FAILED_PRECONDITION`` as from the
host. A settlement is applied at once and its failure reaches the function (as an UNKNOWN status, as from
the host). What each message method does is the extension's: :func:`message_call` says which receiver call
a Complete / Abandon / Deadletter / Defer / RenewMessageLock request makes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from shared.amqp.async_receiver import AsyncEntityReceiver
from shared.amqp.received import ReceivedMessage

# What the Functions host passes the worker (int.MaxValue): the extension sizes its channel with it.
GRPC_MAX_MESSAGE_LENGTH = 2147483647

MessageAction = Callable[[AsyncEntityReceiver, ReceivedMessage], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class MessageCall:
    """One settlement request on a message, by lock token."""

    method: str
    token: str
    action: MessageAction
    settles: bool = True  # RenewMessageLock leaves the message to the host's autoComplete/abandon


_PLAIN: dict[str, MessageAction] = {
    "Complete": lambda r, m: r.complete_message(m),  # removed from its entity
    "Abandon": lambda r, m: r.abandon_message(m),  # lock released, delivery count grows
    "Defer": lambda r, m: r.defer_message(m),  # retrievable only by sequence number
}


def message_call(method: str, request: Any) -> MessageCall:
    """The receiver call a Complete / Abandon / Deadletter / Defer / RenewMessageLock request makes."""
    token = str(request.locktoken)
    if method == "Deadletter":
        reason = request.deadletterReason.value if request.HasField("deadletterReason") else None
        description = (
            request.deadletterErrorDescription.value
            if request.HasField("deadletterErrorDescription")
            else None
        )
        return MessageCall(
            method, token, lambda r, m: r.dead_letter_message(m, reason=reason, error_description=description)
        )
    if method == "RenewMessageLock":
        return MessageCall(method, token, lambda r, m: r.renew_message_lock(m), settles=False)
    return MessageCall(method, token, _PLAIN[method])


@dataclass(slots=True)
class InvocationSettlement:
    """One invocation's messages: which the function settled itself, and the calls it made."""

    receiver: AsyncEntityReceiver
    loop: asyncio.AbstractEventLoop
    messages: dict[str, ReceivedMessage] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # lock tokens settled through the gRPC service
    calls: list[str] = field(default_factory=list)  # the gRPC methods the function called, in order
    # Set when the listener receives on this receiver while the invocation runs: it runs a call on the
    # listener's own task and returns its result (awaited on the loop), between two receives: a call queued
    # behind a pending receive on the receiver's thread would wait out that receive.
    on_listener: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None

    def is_settled(self, message: ReceivedMessage) -> bool:
        """Whether the function settled ``message`` itself."""
        # By the message object, as the extension's SettledMessages is keyed.
        return any(self.messages.get(token) is message for token in self.settled)


class SettlementRegistry:
    """Lock token / session id -> the invocation that holds it, for the gRPC service (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, InvocationSettlement] = {}
        self._sessions: dict[str, tuple[AsyncEntityReceiver, asyncio.AbstractEventLoop]] = {}
        self._released_sessions: set[str] = set()

    def register(self, invocation: InvocationSettlement, messages: list[ReceivedMessage]) -> None:
        """Make ``messages`` settleable through the service until :meth:`release`."""
        with self._lock:
            for message in messages:
                token = str(message.lock_token)
                invocation.messages[token] = message
                self._by_token[token] = invocation

    def release(self, invocation: InvocationSettlement) -> None:
        """The invocation ended: its tokens are no longer known to the service."""
        with self._lock:
            for token in invocation.messages:
                if self._by_token.get(token) is invocation:
                    del self._by_token[token]

    def register_session(
        self, session_id: str, receiver: AsyncEntityReceiver, loop: asyncio.AbstractEventLoop
    ) -> None:
        """The session's receiver, for the session operations."""
        with self._lock:
            self._sessions[session_id] = (receiver, loop)
            self._released_sessions.discard(session_id)

    def close_session(self, session_id: str, receiver: AsyncEntityReceiver) -> None:
        """The session's receiver was closed."""
        with self._lock:
            held = self._sessions.get(session_id)
            if held is not None and held[0] is receiver:
                del self._sessions[session_id]
            self._released_sessions.discard(session_id)

    def request_release(self, session_id: str) -> None:
        """The function asked to release the session: the listener closes it after the invocation."""
        with self._lock:
            self._released_sessions.add(session_id)

    def release_requested(self, session_id: str) -> bool:
        """Whether the function asked to release ``session_id``."""
        with self._lock:
            return session_id in self._released_sessions

    def claim(self, call: MessageCall) -> tuple[InvocationSettlement, Callable[[], Awaitable[Any]]] | None:
        """The invocation holding ``call``'s lock token and the receiver call to make, with the call
        recorded (and the message counted as settled by the function, if the call settles); None for an
        unknown token."""
        invocation = self.invocation(call.token)
        if invocation is None:
            return None
        message = invocation.messages[call.token]
        invocation.calls.append(call.method)
        if call.settles:
            invocation.settled.add(call.token)

        def act() -> Awaitable[Any]:
            return call.action(invocation.receiver, message)

        return invocation, act

    def invocation(self, token: str) -> InvocationSettlement | None:
        """The invocation holding ``token``."""
        with self._lock:
            return self._by_token.get(token)

    def session(self, session_id: str) -> tuple[AsyncEntityReceiver, asyncio.AbstractEventLoop] | None:
        """The receiver holding ``session_id`` and its loop."""
        with self._lock:
            return self._sessions.get(session_id)


REGISTRY = SettlementRegistry()


def worker_arguments(port: int) -> list[str]:
    """The arguments the Functions host starts the Python worker with, as far as the extension reads them."""
    return [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--functions-grpc-max-message-length",
        str(GRPC_MAX_MESSAGE_LENGTH),
    ]
