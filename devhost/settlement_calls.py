"""What each method of the extension's ``Settlement`` gRPC service does, as the host's Service Bus extension
implements it: which receiver call a request makes, what it answers, and the status texts it fails with.

devhost serves the service on each host's loop (:mod:`devhost.servicebus.settlement_service`), which reads its
semantics from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver, ServiceBusSession
from azurefunctions.extensions.bindings.protos import settlement_pb2
from google.protobuf.empty_pb2 import Empty  # type: ignore[import-untyped]
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]

MessageAction = Callable[[ServiceBusReceiver, ServiceBusReceivedMessage], Awaitable[Any]]
SessionAction = Callable[[ServiceBusSession], Awaitable[Any]]

# What ASP.NET Core gRPC answers (as UNKNOWN) when a handler throws and detailed errors are off, as on the
# host: the cause goes to the host's log only.
HANDLER_FAILED = "Exception was thrown by handler."


def lock_token_not_found(token: str) -> str:
    """The FAILED_PRECONDITION detail for a lock token no running invocation holds."""
    return f"LockToken {token} not found."


def session_not_found(session_id: str) -> str:
    """The FAILED_PRECONDITION detail for a session no receiver holds."""
    return f"SessionId {session_id} not found."


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
