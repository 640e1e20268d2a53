"""Errors the broker reports to clients, each carrying the AMQP condition the SDK maps to an exception."""

from __future__ import annotations

NOT_FOUND = "amqp:not-found"
UNAUTHORIZED = "amqp:unauthorized-access"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
NOT_ALLOWED = "amqp:not-allowed"
NOT_IMPLEMENTED = "amqp:not-implemented"
DECODE_ERROR = "amqp:decode-error"
INVALID_FIELD = "amqp:invalid-field"
ENTITY_DISABLED = "com.microsoft:entity-disabled"
MESSAGE_LOCK_LOST = "com.microsoft:message-lock-lost"
MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
ARGUMENT_ERROR = "com.microsoft:argument-error"
ARGUMENT_OUT_OF_RANGE = "com.microsoft:argument-out-of-range"
TIMEOUT = "com.microsoft:timeout"
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"


class BrokerError(Exception):
    """A refused operation: ``condition`` is the AMQP error condition, ``description`` the text."""

    status_code = 400

    def __init__(self, condition: str, description: str, status_code: int | None = None) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description
        if status_code is not None:
            self.status_code = status_code


def entity_not_found(path: str, namespace: str) -> BrokerError:
    """The error Azure gives for an entity that does not exist."""
    return BrokerError(
        NOT_FOUND,
        f"The messaging entity '{namespace}:{path}' could not be found. "
        "To know more visit https://aka.ms/sbResourceMgrExceptions.",
        404,
    )


def lock_lost(detail: str = "") -> BrokerError:
    """The error Azure gives when a lock token is unknown or expired."""
    return BrokerError(
        MESSAGE_LOCK_LOST,
        "The lock supplied is invalid. Either the lock expired, or the message has already been removed "
        "from the queue, or was received by a different receiver instance."
        + (f" {detail}" if detail else ""),
        410,
    )


def non_string_session_id(value: object) -> str:
    """The refusal of a session id (a message's group-id or a receiver's session filter) that is not a
    string: AMQP types both as strings and Azure's codec rejects any other type as an invalid field."""
    return f"The SessionId must be a string, not {type(value).__name__} {value!r}."
