"""HTTP keys and auth levels, as the Functions host checks them.

* ``anonymous``: no key;
* ``function``: that function's key, or the host key, or the master key;
* ``admin``: only the master key (also required by the ``/admin`` endpoints).

A key comes in the ``x-functions-key`` header or the ``code`` query parameter. Keys not fixed in
local.settings.json (``Keys``) are read from the secrets folder (``--data-dir``, see
:mod:`devhost.http.key_store`), where they are created on first start, or without one generated at each start.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Iterable

from devhost.local_settings import ConfiguredKeys

ANONYMOUS = "ANONYMOUS"
FUNCTION = "FUNCTION"
ADMIN = "ADMIN"
KEY_HEADER = "x-functions-key"
KEY_QUERY = "code"


def generate_key() -> str:
    """A random key shaped like the host's (URL-safe base64, 40 bytes)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(40)).decode("ascii").rstrip("=")


class HostKeys:
    """The master key, the default host key and one default key per function."""

    def __init__(self, configured: ConfiguredKeys, function_names: Iterable[str]) -> None:
        self.master = configured.master or generate_key()
        self.host = configured.host or generate_key()
        self.functions = {name: configured.functions.get(name) or generate_key() for name in function_names}

    def function_key(self, name: str) -> str:
        """The default key of function ``name``."""
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no function named '{name}'") from None

    def authorizes(self, level: str, function_name: str | None, provided: str | None) -> bool:
        """Whether ``provided`` grants access at ``level`` to ``function_name``."""
        level = level.upper()
        if level == ANONYMOUS:
            return True
        if not provided:
            return False
        candidates = [self.master]
        if level != ADMIN:
            candidates.append(self.host)
            if function_name is not None and function_name in self.functions:
                candidates.append(self.functions[function_name])
        return any(hmac.compare_digest(provided.encode(), key.encode()) for key in candidates)
