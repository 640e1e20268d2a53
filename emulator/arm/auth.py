"""Bearer-token check for the ARM endpoints.

ARM accepts an Entra ID access token; the emulator accepts exactly one development token instead (given
with ``--management-token`` or generated at start). The comparison is constant-time.
"""

from __future__ import annotations

import hmac
import secrets

from emulator.arm.errors import ArmError

_CHALLENGE = (
    'Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token", '
    'error_description="{}"'
)


def generate_token() -> str:
    """A fresh random development token."""
    return secrets.token_urlsafe(32)


def check_bearer(authorization: str | None, token: str) -> None:
    """Raise the 401 ARM gives unless ``authorization`` is ``Bearer <token>``."""
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
    if not hmac.compare_digest(presented.strip().encode(), token.encode()):
        raise _unauthorized(
            "InvalidAuthenticationToken",
            "The access token is invalid. The emulator accepts only its development token "
            "(--management-token).",
        )


def _unauthorized(code: str, message: str) -> ArmError:
    challenge = _CHALLENGE.format(message.replace('"', "'"))
    return ArmError(401, code, message, (("WWW-Authenticate", challenge),))
