"""The Settlement service on the host's own event loop, for a worker process.

With the function code in a worker process, each host serves the extension's Settlement calls with a
``grpc.aio`` server of its own (its port goes into that worker's arguments), running on the loop that holds
the receivers: a call is awaited where the receiver lives, with no thread hop per call (a thread-pool
``grpc.server`` cost over a millisecond of the host's CPU per call, gRPC threads contending for the GIL with
the receive loop, and bounded an SDK-typed function that settles at about a third of the bare SDK's rate).
The :class:`~devhost.servicebus.settlement.SettlementRegistry` tells which invocation holds a lock token, an
unknown token is ``FAILED_PRECONDITION``, a failed call ``UNKNOWN`` with ASP.NET Core's fixed detail.
Settlements are applied at once: the worker's coroutines do not run on this loop. What each session method
does and the status texts a call fails with are the host's Service Bus extension's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc  # type: ignore[import-untyped]
from azurefunctions.extensions.bindings.protos import settlement_pb2, settlement_pb2_grpc
from google.protobuf.empty_pb2 import Empty  # type: ignore[import-untyped]
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]

from devhost.servicebus.settlement import (
    GRPC_MAX_MESSAGE_LENGTH,
    REGISTRY,
    MessageCall,
    SettlementRegistry,
    message_call,
)
from shared.amqp.async_receiver import AsyncSession

logger = logging.getLogger("devhost.settlement")

SessionAction = Callable[[AsyncSession], Awaitable[Any]]

# What ASP.NET Core gRPC answers (as UNKNOWN) when a handler throws and detailed errors are off, as on the
# host: the cause goes to the host's log only.
HANDLER_FAILED = "Exception was thrown by handler."


def lock_token_not_found(token: str) -> str:
    """The FAILED_PRECONDITION detail for a lock token no running invocation holds."""
    return f"LockToken {token} not found."


def session_not_found(session_id: str) -> str:
    """The FAILED_PRECONDITION detail for a session no receiver holds."""
    return f"SessionId {session_id} not found."


def session_action(method: str, request: Any) -> SessionAction:
    """The session call a GetSessionState / SetSessionState / RenewSessionLock request makes."""
    if method == "GetSessionState":
        return lambda session: session.get_state()
    if method == "SetSessionState":
        return lambda session: session.set_state(request.sessionState)
    if method == "RenewSessionLock":
        return lambda session: session.renew_lock()
    raise ValueError(f"not a session call: {method}")


def session_response(method: str, result: Any) -> Any:
    """What a session call answers: the state bytes, the new lock expiry, or nothing."""
    if method == "GetSessionState":
        return settlement_pb2.GetSessionStateResponse(sessionState=result or b"")
    if method == "RenewSessionLock":
        stamp = Timestamp()
        stamp.FromDatetime(result)
        return settlement_pb2.RenewSessionLockResponse(lockedUntil=stamp)
    return Empty()


async def _on_loop(loop: asyncio.AbstractEventLoop, call: Callable[[], Awaitable[Any]]) -> Any:
    """Await ``call`` on ``loop`` (the receiver's), from this one."""
    if loop is asyncio.get_running_loop():
        return await call()

    async def run() -> Any:
        return await call()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))


class AsyncSettlementService(settlement_pb2_grpc.SettlementServicer):  # type: ignore[misc]
    """The ``Settlement`` service on the host's loop, for a worker process."""

    def __init__(self, registry: SettlementRegistry) -> None:
        self._registry = registry

    async def _settle(self, call: MessageCall, context: grpc.aio.ServicerContext) -> Empty:
        claimed = self._registry.claim(call)
        if claimed is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, lock_token_not_found(call.token))
        assert claimed is not None
        invocation, act = claimed
        via = invocation.on_listener
        try:
            await _on_loop(invocation.loop, act if via is None else lambda: via(act))
        except Exception as exc:
            if call.settles:
                invocation.settled.discard(call.token)
            logger.error("Settlement failed: %s: %s", type(exc).__name__, exc)
        else:
            return Empty()
        await context.abort(grpc.StatusCode.UNKNOWN, HANDLER_FAILED)
        return Empty()  # not reached: abort raises

    async def Complete(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Complete the message: removed from its entity."""
        return await self._settle(message_call("Complete", request), context)

    async def Abandon(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Abandon: the lock is released and the delivery count grows."""
        return await self._settle(message_call("Abandon", request), context)

    async def Deadletter(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Dead-letter with the reason and description the function gave."""
        return await self._settle(message_call("Deadletter", request), context)

    async def Defer(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Defer: retrievable only by sequence number."""
        return await self._settle(message_call("Defer", request), context)

    async def RenewMessageLock(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Renew the message's lock now."""
        return await self._settle(message_call("RenewMessageLock", request), context)

    async def _session_call(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId)
        if held is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, session_not_found(request.sessionId))
        assert held is not None
        receiver, loop = held
        action = session_action(method, request)
        try:
            session = receiver.session
            assert session is not None  # only session receivers are registered by session id
            return session_response(method, await _on_loop(loop, lambda: action(session)))
        except Exception as exc:
            logger.error("Settlement failed: %s: %s", type(exc).__name__, exc)
        await context.abort(grpc.StatusCode.UNKNOWN, HANDLER_FAILED)

    async def GetSessionState(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """The session's state bytes."""
        return await self._session_call("GetSessionState", request, context)

    async def SetSessionState(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Set the session's state."""
        return await self._session_call("SetSessionState", request, context)

    async def ReleaseSession(self, request: Any, context: grpc.aio.ServicerContext) -> Empty:
        """Release the session once the current invocation ends (the host closes its receiver)."""
        if self._registry.session(request.sessionId) is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, session_not_found(request.sessionId))
        self._registry.request_release(request.sessionId)
        return Empty()

    async def RenewSessionLock(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Renew the session lock; answers the new expiry."""
        return await self._session_call("RenewSessionLock", request, context)


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
