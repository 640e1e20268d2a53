"""Bearer-token check for the ARM endpoints.

ARM accepts an Entra ID access token; the emulator accepts its development token (given with
``--management-token`` or generated at start; the comparison is constant-time) and a token for
``https://management.azure.com`` from its own managed-identity endpoint (:mod:`emulator.identity`).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable

from emulator.arm.errors import ArmError

_CHALLENGE = (
    'Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token", '
    'error_description="{}"'
)


def generate_token() -> str:
    """A fresh random development token."""
    return secrets.token_urlsafe(32)


def check_bearer(
    authorization: str | None, token: str, check_jwt: Callable[[str], str | None] | None = None
) -> None:
    """Raise the 401 ARM gives unless ``authorization`` is ``Bearer <token>``, or a JWT ``check_jwt``
    accepts (it returns None for a good token, else why not)."""
    if not authorization:
        raise _unauthorized(
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        )
    scheme, _, presented = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise _unauthorized(
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is provided in an invalid format.",
        )
    if hmac.compare_digest(presented.strip().encode(), token.encode()):
        return
    refusal = check_jwt(presented.strip()) if check_jwt is not None and presented.count(".") == 2 else ""
    if refusal is None:
        return
    raise _unauthorized(
        "InvalidAuthenticationToken",
        f"The access token is invalid. {refusal}"
        if refusal
        else "The access token is invalid. The emulator accepts only its development token "
        "(--management-token) and tokens from its managed-identity endpoint.",
    )


def _unauthorized(code: str, message: str) -> ArmError:
    challenge = _CHALLENGE.format(message.replace('"', "'"))
    return ArmError(401, code, message, (("WWW-Authenticate", challenge),))
