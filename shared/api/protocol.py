"""HTTP-independent request/response types and the API's error model.

Every error the API returns has the same JSON shape::

    {"error": {"code": "ValidationFailed", "message": "...", "details": ["events.0: ...", ...]}}

with the status of its :class:`ApiError` subclass: 400 validation (every problem listed), 403 endpoint not
allowed, 404 unknown event type, 409 quota or a concurrent change (with ``Retry-After``), 413 a message
larger than Service Bus takes, 415 a body that is not JSON by its ``Content-Type``, 502 the management
plane or the broker refused. Anything unexpected becomes a 500
with an error id that is logged with the stack trace; the trace itself never reaches the client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """An HTTP request as the services see it."""

    method: str
    route_params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Request headers by lower-case name (HTTP header names are case-insensitive)."""


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A JSON response."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


class ApiError(Exception):
    """An error the API reports to its caller."""

    status = 500
    code = "InternalError"

    def __init__(
        self,
        message: str,
        details: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details or [])
        self.headers = dict(headers or {})
        self.extra = extra

    def response(self) -> ApiResponse:
        """The JSON error response (with the error's HTTP headers, e.g. ``Retry-After``)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message, "details": self.details}
        error.update(self.extra)
        return ApiResponse(self.status, {"error": error}, self.headers)


class ValidationFailed(ApiError):
    status = 400
    code = "ValidationFailed"


class EndpointNotAllowed(ApiError):
    """The endpoint name is valid, but the app's settings do not let it be provisioned."""

    status = 403
    code = "EndpointNotAllowed"


class NotFound(ApiError):
    status = 404
    code = "NotFound"


class ProvisioningBusy(ApiError):
    """Another request held the endpoint's or a topic's lock for the whole wait budget: retry later."""

    status = 409
    code = "ProvisioningInProgress"


class QuotaExceeded(ApiError):
    status = 409
    code = "QuotaExceeded"


class PayloadTooLarge(ApiError):
    """The request would make a message larger than the destination's maximum message size."""

    status = 413
    code = "PayloadTooLarge"


class UnsupportedMediaType(ApiError):
    """The body's ``Content-Type`` names a type the operation does not read."""

    status = 415
    code = "UnsupportedMediaType"


class ManagementRefused(ApiError):
    status = 502
    code = "ManagementRefused"


class BrokerRefused(ApiError):
    status = 502
    code = "ServiceBusRefused"


class Misconfigured(ApiError):
    """The app settings are missing or invalid: the operator must fix them (no stack trace involved)."""

    status = 500
    code = "Misconfigured"


def pydantic_problems(error: ValidationError) -> list[str]:
    """Every pydantic error as ``location: message`` (locations use the JSON field names)."""
    problems = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "body"
        problems.append(f"{location}: {item['msg']}")
    return problems


def parse_body[M: BaseModel](model: type[M], body: bytes) -> M:
    """``body`` validated as ``model``; :class:`ValidationFailed` listing every problem otherwise."""
    if not body.strip():
        raise ValidationFailed("the request body is empty; a JSON object is required")
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        problems = pydantic_problems(error)
        raise ValidationFailed(
            f"the request body is invalid ({len(problems)} problem(s))", problems
        ) from None


def guarded(call: Callable[[], ApiResponse]) -> ApiResponse:
    """Run ``call``; an :class:`ApiError` becomes its response, anything else a logged 500 with an id."""
    try:
        return call()
    except ApiError as error:
        return error.response()
    except Exception:
        error_id = uuid.uuid4().hex
        log.exception("unexpected error %s", error_id)
        return ApiResponse(
            500,
            {
                "error": {
                    "code": "InternalError",
                    "message": f"an unexpected error occurred; the server log has it under id {error_id}",
                    "details": [],
                }
            },
        )
