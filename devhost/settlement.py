"""The host's Settlement gRPC service, through which the Service Bus binding extension settles.

In Azure a function's ``ServiceBusMessageActions`` (the extension's class, a singleton) opens a gRPC channel
to the host at the worker's ``--host``/``--port`` arguments and calls ``Settlement`` (``settlement.proto``,
shipped in the extension) with the message's lock token; the host settles on the receiver that holds the
message. devhost serves that same service and starts the worker process with the same arguments, so the
extension's own client (a process-wide singleton) reaches it: each host with a worker process serves it on
its own event loop (:mod:`devhost.settlement_aio`, same semantics); with the worker in the host's process
(``--in-process-worker``) the thread-pool server below serves it, once per process, and the arguments go
on the host's own ``sys.argv``.

Each invocation registers its messages by lock token (and, for sessions, its session id) in a
:class:`SettlementRegistry`; an unknown or already-released token gets ``FAILED_PRECONDITION`` as from the
host. With a worker process, a settlement is applied at once and its failure reaches the function (as
an UNKNOWN status, as from the host). With the worker in this process, a settlement from a coroutine
function is queued and applied when the function returns (told OK): the function blocks the very event loop
that holds the receiver.

In-process the hop is dear: the extension's client, this service and the receiver share one interpreter,
so a call costs about 0.7-1.1 ms of this process's CPU (``bench/settlement_grpc.py``); the worker process
moves the client's half (and the extension's decoding of each trigger) out of the host's GIL, and the
asyncio server saves the thread handoffs.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc  # type: ignore[import-untyped]
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver
from azurefunctions.extensions.bindings.protos import settlement_pb2_grpc
from google.protobuf.empty_pb2 import Empty  # type: ignore[import-untyped]

from devhost.settlement_calls import (
    HANDLER_FAILED,
    MessageCall,
    lock_token_not_found,
    message_call,
    session_action,
    session_not_found,
    session_response,
)

logger = logging.getLogger("devhost.settlement")

# What the Functions host passes the worker (int.MaxValue): the extension sizes its channel with it.
GRPC_MAX_MESSAGE_LENGTH = 2147483647
SETTLE_TIMEOUT_SECONDS = 60.0


@dataclass(slots=True)
class InvocationSettlement:
    """One invocation's messages: which the function settled itself, and settlements to apply at return."""

    receiver: ServiceBusReceiver
    loop: asyncio.AbstractEventLoop
    deferred: bool  # a coroutine function: apply settlements after it returns (see the module docstring)
    messages: dict[str, ServiceBusReceivedMessage] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # lock tokens settled through the gRPC service
    pending: list[Callable[[], Awaitable[Any]]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # the gRPC methods the function called, in order
    # Set when the listener receives on this receiver while the invocation runs: it runs a call on the
    # listener's own task and returns its result (awaited on the loop). The SDK's aio receiver must not be
    # read by two coroutines at once: a settlement running beside a pending receive consumes the frames the
    # receive waits for, and the receive sits out its timeout (at maxConcurrentCalls 16 that cost 40x).
    on_listener: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None

    def is_settled(self, message: ServiceBusReceivedMessage) -> bool:
        """Whether the function settled ``message`` itself."""
        return str(message.lock_token) in self.settled

    def call_from_thread(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run a receiver call from a gRPC thread on the loop that holds the receiver; its result."""
        via = self.on_listener
        return _run(self.loop, call if via is None else lambda: via(call))

    async def apply_pending(self) -> None:
        """Run settlements requested by a coroutine function, in order."""
        while self.pending:
            action = self.pending.pop(0)
            try:
                await action()
            except Exception as exc:  # the function was told OK; the broker redelivers after the lock
                logger.error("a settlement requested by a coroutine function failed: %s", exc)


class SettlementRegistry:
    """Lock token / session id -> the invocation that holds it, for the gRPC service (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, InvocationSettlement] = {}
        self._sessions: dict[str, tuple[ServiceBusReceiver, asyncio.AbstractEventLoop]] = {}
        self._released_sessions: set[str] = set()

    def register(self, invocation: InvocationSettlement, messages: list[ServiceBusReceivedMessage]) -> None:
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
        self, session_id: str, receiver: ServiceBusReceiver, loop: asyncio.AbstractEventLoop
    ) -> None:
        """The session's receiver, for the session operations."""
        with self._lock:
            self._sessions[session_id] = (receiver, loop)
            self._released_sessions.discard(session_id)

    def close_session(self, session_id: str, receiver: ServiceBusReceiver) -> None:
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

    def session(self, session_id: str) -> tuple[ServiceBusReceiver, asyncio.AbstractEventLoop] | None:
        """The receiver holding ``session_id`` and its loop."""
        with self._lock:
            return self._sessions.get(session_id)


REGISTRY = SettlementRegistry()


def _run(loop: asyncio.AbstractEventLoop, call: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        return await call()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(SETTLE_TIMEOUT_SECONDS)


def _abort_as_handler_exception(context: grpc.ServicerContext, exc: Exception) -> None:
    """What the host answers when a settlement throws: UNKNOWN with ASP.NET Core's fixed detail."""
    logger.error("Settlement failed: %s: %s", type(exc).__name__, exc)
    context.abort(grpc.StatusCode.UNKNOWN, HANDLER_FAILED)


class SettlementService(settlement_pb2_grpc.SettlementServicer):  # type: ignore[misc]
    """The ``Settlement`` service on a thread pool, for function code in the host's process."""

    def __init__(self, registry: SettlementRegistry) -> None:
        self._registry = registry

    def _settle(self, call: MessageCall, context: grpc.ServicerContext) -> Empty:
        claimed = self._registry.claim(call)
        if claimed is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, lock_token_not_found(call.token))
        assert claimed is not None
        invocation, act = claimed
        if invocation.deferred:
            invocation.pending.append(act)
            return Empty()
        try:
            invocation.call_from_thread(act)
        except Exception as exc:
            if call.settles:
                invocation.settled.discard(call.token)
            _abort_as_handler_exception(context, exc)
        return Empty()

    def Complete(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Complete the message: removed from its entity."""
        return self._settle(message_call("Complete", request), context)

    def Abandon(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Abandon: the lock is released and the delivery count grows."""
        return self._settle(message_call("Abandon", request), context)

    def Deadletter(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Dead-letter with the reason and description the function gave."""
        return self._settle(message_call("Deadletter", request), context)

    def Defer(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Defer: retrievable only by sequence number."""
        return self._settle(message_call("Defer", request), context)

    def RenewMessageLock(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Renew the message's lock now."""
        return self._settle(message_call("RenewMessageLock", request), context)

    def _session_call(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId)
        if held is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, session_not_found(request.sessionId))
        assert held is not None
        receiver, loop = held
        action = session_action(method, request)
        try:
            return session_response(method, _run(loop, lambda: action(receiver.session)))
        except Exception as exc:
            _abort_as_handler_exception(context, exc)

    def GetSessionState(self, request: Any, context: grpc.ServicerContext) -> Any:
        """The session's state bytes."""
        return self._session_call("GetSessionState", request, context)

    def SetSessionState(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Set the session's state."""
        return self._session_call("SetSessionState", request, context)

    def ReleaseSession(self, request: Any, context: grpc.ServicerContext) -> Empty:
        """Release the session once the current invocation ends (the host closes its receiver)."""
        if self._registry.session(request.sessionId) is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, session_not_found(request.sessionId))
        self._registry.request_release(request.sessionId)
        return Empty()

    def RenewSessionLock(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Renew the session lock; answers the new expiry."""
        return self._session_call("RenewSessionLock", request, context)


@dataclass(slots=True)
class _Server:
    server: grpc.Server
    port: int


_SERVER: _Server | None = None
_SERVER_LOCK = threading.Lock()
_ARGV_EXTENDED = False


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


def start_settlement_server() -> int:
    """Start the process's Settlement service (once); its port. A worker process gets the port in its
    arguments (:func:`worker_arguments`)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            options = [
                ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_LENGTH),
                ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_LENGTH),
            ]
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=options)
            settlement_pb2_grpc.add_SettlementServicer_to_server(SettlementService(REGISTRY), server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            _SERVER = _Server(server, port)
            logger.info("Settlement gRPC service listening on 127.0.0.1:%d", port)
        return _SERVER.port


def ensure_settlement_server() -> int:
    """For a worker in this process: start the Settlement service (once) and put the worker arguments on
    this process's ``sys.argv``, where the extension's client looks for them; the port."""
    global _ARGV_EXTENDED
    port = start_settlement_server()
    with _SERVER_LOCK:
        if not _ARGV_EXTENDED:
            # Last occurrence wins in argparse: these override a devhost CLI's own --host/--port.
            sys.argv.extend(worker_arguments(port))
            _ARGV_EXTENDED = True
    return port
