"""Microsoft Entra ID access tokens as a managed identity gets them, issued and checked by the emulator.

In Azure a Functions / App Service app with a managed identity asks its host's local token endpoint
(``IDENTITY_ENDPOINT``, authenticated with ``IDENTITY_HEADER``) for a token for a resource, then presents
that JWT to Service Bus: ``put-token`` with type ``jwt`` on the AMQP ``$cbs`` node, ``Authorization: Bearer``
on the namespace's HTTPS API. The emulator stands in for both Entra ID and Service Bus, so it signs its
tokens itself (HS256 with a key only it holds, kept under the data directory so tokens a client cached
outlive a restart) and accepts exactly those: a token signed with another key, for another audience, not
yet valid or expired is refused with the reason, as Service Bus refuses it.

The identity is the app's system-assigned one, and it holds the namespace's data owner role: a token
grants the whole namespace (Azure RBAC scopes below the namespace are not modelled)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.auth import Grant, TokenRejected

SERVICE_BUS_RESOURCE = "https://servicebus.azure.net"
MANAGEMENT_RESOURCE = "https://management.azure.com"
RESOURCES = (SERVICE_BUS_RESOURCE, MANAGEMENT_RESOURCE)
# Entra ID's access tokens for a managed identity last about a day (the SDK renews them before expiry).
TOKEN_LIFETIME_SECONDS = 24 * 3600
# The tenant and object id the emulator's identity has: fixed, so tokens look alike across restarts.
TENANT_ID = "00000000-0000-0000-0000-00000000e1d0"
PRINCIPAL_ID = "00000000-0000-0000-0000-0000000b05ba"
ISSUER = f"https://sts.windows.net/{TENANT_ID}/"
STATE_FILE_NAME = "identity.json"


def canonical_resource(resource: str) -> str | None:
    """The resource a token request or audience names (``https://servicebus.azure.net//`` is the SDK's
    scope minus ``/.default``), or None for one the emulator does not issue tokens for."""
    wanted = resource.strip().rstrip("/").lower()
    for known in RESOURCES:
        if wanted == known:
            return known
    return None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The payload of a JWT-shaped token without checking it (None if it is not one): which API a bearer
    token is meant for decides where a request on the shared management port goes."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(_unb64(parts[1]))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token as the App Service endpoint (api-version 2019-08-01) returns it."""

    access_token: str
    expires_on: int
    resource: str

    def response(self) -> dict[str, str]:
        return {
            "access_token": self.access_token,
            "expires_on": str(self.expires_on),
            "resource": self.resource,
            "token_type": "Bearer",
            "client_id": PRINCIPAL_ID,
        }


class IdentityAuthority:
    """Issues and verifies the emulator's managed-identity tokens; holds the ``IDENTITY_HEADER`` secret."""

    def __init__(self, signing_key: bytes, identity_header: str) -> None:
        self._key = signing_key
        self.identity_header = identity_header

    @classmethod
    def load(cls, data_dir: Path | None) -> IdentityAuthority:
        """The key and header kept in ``data_dir`` (made on first use, owner-readable only), or fresh ones
        without a data directory."""
        if data_dir is None:
            return cls(secrets.token_bytes(32), secrets.token_urlsafe(24))
        path = data_dir / STATE_FILE_NAME
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            return cls(base64.b64decode(state["signingKey"]), str(state["identityHeader"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing or damaged: a new identity (tokens cached by clients are refused, then renewed)
        authority = cls(secrets.token_bytes(32), secrets.token_urlsafe(24))
        data_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.tmp")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "signingKey": base64.b64encode(authority._key).decode(),
                    "identityHeader": authority.identity_header,
                },
                handle,
            )
        partial.replace(path)
        return authority

    def issue(self, resource: str, now: float) -> IssuedToken:
        """A token for ``resource`` (one of :data:`RESOURCES`) valid from ``now`` for a day."""
        audience = canonical_resource(resource)
        if audience is None:
            raise ValueError(f"the emulator issues no tokens for resource '{resource}'")
        issued_at = int(now)
        expires_on = issued_at + TOKEN_LIFETIME_SECONDS
        claims = {
            "aud": audience,
            "iss": ISSUER,
            "iat": issued_at,
            "nbf": issued_at,
            "exp": expires_on,
            "oid": PRINCIPAL_ID,
            "sub": PRINCIPAL_ID,
            "tid": TENANT_ID,
            "idtyp": "app",
            "uti": uuid.uuid4().hex,
        }
        return IssuedToken(self._sign(claims), expires_on, resource)

    def _sign(self, claims: dict[str, Any]) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode("ascii"), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def check(self, token: str, resource: str, now: float) -> Grant:
        """Verify a token presented for ``resource``: the namespace-wide grant it gives, or
        :class:`~emulator.auth.TokenRejected` saying why not (Service Bus's wording where it has one)."""
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected("InvalidToken: the token is not a JWT (header.payload.signature).")
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except ValueError:
            raise TokenRejected("InvalidToken: the JWT is malformed (not base64url-encoded JSON).") from None
        if not isinstance(header, dict) or not isinstance(claims, dict) or header.get("alg") != "HS256":
            raise TokenRejected(
                "InvalidSignature: the JWT was not issued by the emulator's identity endpoint."
            )
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode("ascii"), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise TokenRejected(
                "InvalidSignature: the JWT's signature is not valid; it was not issued by this emulator's "
                "identity endpoint (IDENTITY_ENDPOINT)."
            )
        expires_at, not_before = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(expires_at, int) or not isinstance(not_before, int):
            raise TokenRejected("InvalidToken: the JWT's exp and nbf claims must be numbers.")
        if expires_at <= now:
            raise TokenRejected(
                f"ExpiredToken: The token is expired. Expiration time: '{expires_at}' (now {int(now)})."
            )
        if not_before > now + 300:  # Entra ID's clock-skew allowance
            raise TokenRejected(f"InvalidToken: the token is not valid before {not_before} (now {int(now)}).")
        wanted = canonical_resource(resource) or resource
        if claims.get("aud") != wanted:
            raise TokenRejected(
                f"InvalidAudience: the token's audience '{claims.get('aud')}' is not '{wanted}'."
            )
        return Grant("", expires_at)
