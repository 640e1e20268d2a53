"""The managed-identity token endpoint an App Service / Functions host gives its app, served by the emulator.

Azure sets ``IDENTITY_ENDPOINT`` (a plain-HTTP URL on the host's loopback) and ``IDENTITY_HEADER`` (a
secret) in the app's environment; azure-identity's ``ManagedIdentityCredential`` (first usable credential of
``DefaultAzureCredential`` there) then sends::

    GET {IDENTITY_ENDPOINT}?api-version=2019-08-01&resource=https://servicebus.azure.net/
    X-IDENTITY-HEADER: {IDENTITY_HEADER}

and reads ``access_token``, ``expires_on`` (Unix seconds, a string), ``resource`` and ``token_type`` from
the JSON answer; a failure is ``{"statusCode": ..., "message": ...}``, which the SDK reports. The emulator
serves this at :data:`TOKEN_PATH` on its plain-HTTP management port.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from emulator.arm.http import Request, Response
from emulator.identity import RESOURCES, IdentityAuthority, canonical_resource

TOKEN_PATH = "/msi/token"
API_VERSION = "2019-08-01"


def is_token_request(request: Request) -> bool:
    """Whether a request on the management port is for the token endpoint."""
    return request.path.rstrip("/").lower() == TOKEN_PATH


def _failure(status: int, message: str) -> Response:
    return Response.json(status, {"statusCode": status, "message": message})


def token_response(request: Request, authority: IdentityAuthority, clock: Callable[[], float]) -> Response:
    """Answer one token request as the App Service endpoint does."""
    if request.method != "GET":
        return Response.json(405, {"statusCode": 405, "message": "Use GET."}, [("Allow", "GET")])
    presented = request.header("x-identity-header") or ""
    if not hmac.compare_digest(presented.encode(), authority.identity_header.encode()):
        return _failure(
            401,
            "The X-IDENTITY-HEADER header is missing or does not match IDENTITY_HEADER (the emulator prints "
            "it at start and keeps it in its data directory).",
        )
    version = request.param("api-version")
    if version != API_VERSION:
        return _failure(400, f"api-version '{version}' is not supported; use {API_VERSION}.")
    if request.param("client_id") or request.param("mi_res_id") or request.param("object_id"):
        return _failure(
            400,
            "The emulator's app has only a system-assigned identity: leave out client_id, mi_res_id "
            "and object_id.",
        )
    resource = request.param("resource") or ""
    if canonical_resource(resource) is None:
        return _failure(
            400,
            f"The emulator issues no tokens for resource '{resource}'. It issues them for "
            f"{' and '.join(RESOURCES)}.",
        )
    return Response.json(200, authority.issue(resource, clock()).response())
