"""The Settlement service on the host's own event loop, for a worker process.

With the function code in a worker process, each host serves the extension's Settlement calls with a
``grpc.aio`` server of its own (its port goes into that worker's arguments), running on the loop that holds
the receivers: a call is awaited where the receiver lives, with no thread hop per call. The thread-pool
server in :mod:`devhost.settlement` costs over a millisecond of the host's CPU per call (gRPC threads
contending for the GIL with the receive loop, and a handoff to the loop and back) and bounded an SDK-typed
function that settles at about a third of the bare SDK's rate. Semantics and messages are the same: the
:class:`~devhost.settlement.SettlementRegistry` tells which invocation holds a lock token, an unknown token
is ``FAILED_PRECONDITION``, a failed call ``UNKNOWN`` with ASP.NET Core's fixed detail. Settlements are
applied at once: the worker's coroutines do not run on this loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc  # type: ignore[import-untyped]
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver
from azurefunctions.extensions.bindings.protos import settlement_pb2, settlement_pb2_grpc
from google.protobuf.empty_pb2 import Empty  # type: ignore[import-untyped]
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]

from devhost.settlement import GRPC_MAX_MESSAGE_LENGTH, REGISTRY, SettlementRegistry

logger = logging.getLogger("devhost.settlement")

_HANDLER_FAILED = "Exception was thrown by handler."


async def _on_loop(loop: asyncio.AbstractEventLoop, call: Callable[[], Awaitable[Any]]) -> Any:
    """Await ``call`` on ``loop`` (the receiver's), from this one."""
    if loop is asyncio.get_running_loop():
        return await call()

    async def run() -> Any:
        return await call()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))


class AsyncSettlementService(settlement_pb2_grpc.SettlementServicer):  # type: ignore[misc]
    """The ``Settlement`` service as the host's Service Bus extension implements it (asyncio)."""

    def __init__(self, registry: SettlementRegistry) -> None:
        self._registry = registry

    async def _settle(
        self,
        method: str,
        token: str,
        context: grpc.aio.ServicerContext,
        action: Callable[[ServiceBusReceiver, ServiceBusReceivedMessage], Awaitable[Any]],
        *,
        settles: bool = True,
    ) -> Empty:
        invocation = self._registry.invocation(token)
        if invocation is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"LockToken {token} not found.")
        assert invocation is not None
        message = invocation.messages[token]
        invocation.calls.append(method)

        def call() -> Awaitable[Any]:
            return action(invocation.receiver, message)

        if settles:
            invocation.settled.add(token)
        if invocation.deferred:  # not with a worker process; kept for a host that shares its loop
            invocation.pending.append(call)
            return Empty()
        via = invocation.on_listener
        try:
            await _on_loop(invocation.loop, call if via is None else lambda: via(call))
        except Exception as exc:
            if settles:
                invocation.settled.discard(token)
            logger.error("Settlement failed: %s: %s", type(exc).__name__, exc)
        else:
            return Empty()
        await context.abort(grpc.StatusCode.UNKNOWN, _HANDLER_FAILED)
        return Empty()  # not reached: abort raises

    async def Complete(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Complete the message: removed from its entity."""
        return await self._settle("Complete", request.locktoken, context, lambda r, m: r.complete_message(m))

    async def Abandon(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Abandon: the lock is released and the delivery count grows."""
        return await self._settle("Abandon", request.locktoken, context, lambda r, m: r.abandon_message(m))

    async def Deadletter(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Dead-letter with the reason and description the function gave."""
        reason = request.deadletterReason.value if request.HasField("deadletterReason") else None
        description = (
            request.deadletterErrorDescription.value
            if request.HasField("deadletterErrorDescription")
            else None
        )
        return await self._settle(
            "Deadletter",
            request.locktoken,
            context,
            lambda r, m: r.dead_letter_message(m, reason=reason, error_description=description),
        )

    async def Defer(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Defer: retrievable only by sequence number."""
        return await self._settle("Defer", request.locktoken, context, lambda r, m: r.defer_message(m))

    async def RenewMessageLock(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Renew the message's lock now."""
        return await self._settle(
            "RenewMessageLock",
            request.locktoken,
            context,
            lambda r, m: r.renew_message_lock(m),
            settles=False,
        )

    async def _session_call(
        self, session_id: str, context: grpc.aio.ServicerContext, action: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        held = self._registry.session(session_id)
        if held is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"SessionId {session_id} not found.")
        assert held is not None
        receiver, loop = held
        try:
            return await _on_loop(loop, lambda: action(receiver.session))
        except Exception as exc:
            logger.error("Settlement failed: %s: %s", type(exc).__name__, exc)
        await context.abort(grpc.StatusCode.UNKNOWN, _HANDLER_FAILED)

    async def GetSessionState(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """The session's state bytes."""
        state = await self._session_call(request.sessionId, context, lambda s: s.get_state())
        return settlement_pb2.GetSessionStateResponse(sessionState=state or b"")

    async def SetSessionState(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Set the session's state."""
        await self._session_call(request.sessionId, context, lambda s: s.set_state(request.sessionState))
        return Empty()

    async def ReleaseSession(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Release the session once the current invocation ends (the host closes its receiver)."""
        if self._registry.session(request.sessionId) is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"SessionId {request.sessionId} not found."
            )
        self._registry.request_release(request.sessionId)
        return Empty()

    async def RenewSessionLock(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Renew the session lock; answers the new expiry."""
        until = await self._session_call(request.sessionId, context, lambda s: s.renew_lock())
        stamp = Timestamp()
        stamp.FromDatetime(until)
        return settlement_pb2.RenewSessionLockResponse(lockedUntil=stamp)


class LoopSettlementServer:
    """A Settlement service on the running loop, for one host and its worker process."""

    def __init__(self, server: grpc.aio.Server, port: int) -> None:
        self._server = server
        self.port = port

    @classmethod
    async def start(cls) -> LoopSettlementServer:
        """Listen on a free port of 127.0.0.1."""
        options = [
            ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_LENGTH),
            ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_LENGTH),
        ]
        server = grpc.aio.server(options=options)
        settlement_pb2_grpc.add_SettlementServicer_to_server(AsyncSettlementService(REGISTRY), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        logger.info("Settlement gRPC service listening on 127.0.0.1:%d", port)
        return cls(server, port)

    async def stop(self) -> None:
        """Stop serving (the worker using it has stopped)."""
        await self._server.stop(grace=None)
