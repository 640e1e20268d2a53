"""ARM error responses: ``{"error": {"code": ..., "message": ...}}`` with Azure's status codes and codes.

Service Bus reports entity validation failures through ARM as HTTP 400 with the code
``MessagingGatewayBadRequest`` and a ``SubCode=...`` prefix in the message (40000 invalid request,
40300 quota reached, 40400 auto-forwarding destination missing); see
https://learn.microsoft.com/azure/service-bus-messaging/service-bus-resource-manager-exceptions.
Scope errors (subscription, resource group, namespace) use ARM's own codes.
"""

from __future__ import annotations

from emulator.broker import errors as broker_errors
from emulator.broker.errors import BrokerError

MORE = "To know more visit https://aka.ms/sbResourceMgrExceptions."

BAD_REQUEST = "MessagingGatewayBadRequest"
INVALID_CONTENT = "InvalidRequestContent"
NOT_FOUND = "NotFound"
CONFLICT = "Conflict"


class ArmError(Exception):
    """A refused ARM request."""

    def __init__(
        self, status: int, code: str, message: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers

    def body(self) -> dict[str, object]:
        return {"error": {"code": self.code, "message": self.message}}


def bad_request(detail: str, sub_code: int = 40000) -> ArmError:
    return ArmError(400, BAD_REQUEST, f"SubCode={sub_code}. {detail} {MORE}")


def invalid_content(detail: str) -> ArmError:
    return ArmError(
        400, INVALID_CONTENT, f"The request content was invalid and could not be deserialized: {detail}"
    )


def entity_not_found(namespace: str, kind: str, path: str) -> ArmError:
    """Azure's 404; ``kind`` and ``path`` in its tracker form: ``Queue``/``q``, ``Topic``/``t|sub|rule``."""
    return ArmError(404, NOT_FOUND, f"Entity '{namespace}:{kind}:{path}' was not found. {MORE}")


def from_broker(exc: BrokerError) -> ArmError:
    """The ARM form of an error the broker raised."""
    if exc.condition == broker_errors.RESOURCE_LIMIT_EXCEEDED:
        return bad_request(exc.description, 40300)
    if exc.condition == broker_errors.NOT_FOUND:
        if exc.status_code == 404:
            return ArmError(404, NOT_FOUND, f"{exc.description}")
        return bad_request(exc.description, 40400)
    if exc.condition == "com.microsoft:entity-already-exists":
        return ArmError(409, CONFLICT, f"SubCode=40900. Conflict. {exc.description} {MORE}")
    return bad_request(exc.description)
