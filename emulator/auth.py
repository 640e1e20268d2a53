"""Shared Access Signature checking for CBS put-token, as Service Bus does it.

A token is ``SharedAccessSignature sr=<url-encoded resource>&sig=<base64 HMAC-SHA256>&se=<expiry>&skn=<key
name>``; the signature covers the URL-encoded resource exactly as it appears in the token, a newline and
the expiry. The key is the UTF-8 of the configured key (not base64-decoded), as the SDK signs it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import unquote_plus, urlsplit

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"


class TokenRejected(Exception):
    """The token does not grant access; the message says why."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What an accepted token allows: entity paths under ``resource`` until ``expires_at`` (Unix s)."""

    resource: str
    expires_at: int

    def covers(self, entity_path: str, now: float) -> bool:
        if now >= self.expires_at:
            return False
        path = entity_path.strip("/").lower()
        return not self.resource or path == self.resource or path.startswith(self.resource + "/")


def resource_path(uri: str) -> str:
    """The entity path of a resource URI (``sb://host:port/a/b`` → ``a/b``), lower-cased."""
    parts = urlsplit(uri)
    path = parts.path if parts.scheme else uri
    return unquote_plus(path).strip("/").lower()


def sign(resource_uri_encoded: str, expiry: int, key: str) -> str:
    """The base64 signature of a token for the (already URL-encoded) resource and expiry."""
    digest = hmac.new(key.encode("utf-8"), f"{resource_uri_encoded}\n{expiry}".encode(), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode("ascii")


class SasAuthority:
    """Checks SAS tokens against the configured keys."""

    def __init__(self, keys: dict[str, str] | None = None) -> None:
        self._keys = dict(keys) if keys else {DEFAULT_KEY_NAME: DEFAULT_KEY}

    def check(self, token: str, audience: str, now: float | None = None) -> Grant:
        """Validate ``token`` for ``audience`` (the put-token ``name``); return the grant or raise."""
        now = time.time() if now is None else now
        prefix = "SharedAccessSignature "
        if not token.startswith(prefix):
            raise TokenRejected("InvalidSignature: the token is not a SharedAccessSignature token.")
        fields: dict[str, str] = {}
        for part in token[len(prefix) :].split("&"):
            key, sep, value = part.partition("=")
            if not sep:
                raise TokenRejected(f"InvalidSignature: malformed token field '{part}'.")
            fields[key.strip().lower()] = value.strip()
        missing = [name for name in ("sr", "sig", "se", "skn") if name not in fields]
        if missing:
            raise TokenRejected(f"InvalidSignature: the token is missing {', '.join(missing)}.")
        key_name = unquote_plus(fields["skn"])
        configured = self._keys.get(key_name)
        if configured is None:
            raise TokenRejected(f"InvalidSignature: the shared access key name '{key_name}' is not known.")
        try:
            expiry = int(fields["se"])
        except ValueError:
            raise TokenRejected(f"InvalidSignature: expiry '{fields['se']}' is not a number.") from None
        expected = sign(fields["sr"], expiry, configured)
        if not hmac.compare_digest(expected, unquote_plus(fields["sig"])):
            raise TokenRejected("InvalidSignature: the token has an invalid signature.")
        if expiry <= now:
            raise TokenRejected(f"ExpiredToken: the token expired at {expiry} (now {int(now)}).")
        granted = resource_path(unquote_plus(fields["sr"]))
        wanted = resource_path(audience)
        grant = Grant(granted, expiry)
        if not grant.covers(wanted, now):
            raise TokenRejected(
                f"InvalidAudience: the token grants access to '{granted or '/'}', not to '{wanted}'."
            )
        return grant
