"""The HTTP API as application services, independent of HTTP: the request/response and error model
(:mod:`~shared.api.protocol`, re-exported here), publishing (:mod:`~shared.api.publishing`, needs only the
Service Bus connection) and provisioning (:mod:`shared.api.provisioning`, needs the management plane)."""

from shared.api.protocol import (
    ApiError,
    ApiRequest,
    ApiResponse,
    BrokerRefused,
    EndpointNotAllowed,
    ManagementRefused,
    Misconfigured,
    NotFound,
    PayloadTooLarge,
    ProvisioningBusy,
    QuotaExceeded,
    UnsupportedMediaType,
    ValidationFailed,
    guarded,
    parse_body,
    pydantic_problems,
)

__all__ = [
    "ApiError",
    "ApiRequest",
    "ApiResponse",
    "BrokerRefused",
    "EndpointNotAllowed",
    "ManagementRefused",
    "Misconfigured",
    "NotFound",
    "PayloadTooLarge",
    "ProvisioningBusy",
    "QuotaExceeded",
    "UnsupportedMediaType",
    "ValidationFailed",
    "guarded",
    "parse_body",
    "pydantic_problems",
]
