"""``local.settings.json``: app settings (``Values``), the local HTTP port and HTTP keys.

Format as Core Tools reads it, plus one devhost addition, ``Keys``::

    {
        "IsEncrypted": false,
        "Values": {"ServiceBusConnection": "..."},
        "Host": {"LocalHttpPort": 7071},
        "Keys": {"master": "...", "host": "...", "functions": {"subscribe": "..."}},
    }

Keys not given come from the secrets folder of ``--data-dir`` (created there on first start, kept across
restarts, see :mod:`devhost.http.key_store`), or without one are generated at start; either way they are
printed, and HTTP auth is always enforced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class LocalSettingsError(ValueError):
    """local.settings.json is malformed."""


@dataclass(frozen=True, slots=True)
class ConfiguredKeys:
    """HTTP keys fixed in local.settings.json (``None`` / missing: generate one)."""

    master: str | None = None
    host: str | None = None
    functions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LocalSettings:
    """The parsed file."""

    values: Mapping[str, str] = field(default_factory=dict)
    http_port: int | None = None
    keys: ConfiguredKeys = field(default_factory=ConfiguredKeys)


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise LocalSettingsError(f"local.settings.json: {where} must be a string")
    return str(value)


def parse_local_settings(raw: Mapping[str, Any]) -> LocalSettings:
    """Validate a parsed local.settings.json document."""
    if raw.get("IsEncrypted"):
        raise LocalSettingsError("local.settings.json: encrypted settings are not supported (IsEncrypted)")
    values_raw = raw.get("Values") or {}
    if not isinstance(values_raw, dict):
        raise LocalSettingsError("local.settings.json: Values must be an object")
    values = {str(k): _text(v, f"Values.{k}") for k, v in values_raw.items()}
    host = raw.get("Host") or {}
    port = host.get("LocalHttpPort")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise LocalSettingsError("local.settings.json: Host.LocalHttpPort must be an integer")
    keys_raw = raw.get("Keys") or {}
    functions_raw = keys_raw.get("functions") or {}
    keys = ConfiguredKeys(
        master=None if keys_raw.get("master") is None else _text(keys_raw["master"], "Keys.master"),
        host=None if keys_raw.get("host") is None else _text(keys_raw["host"], "Keys.host"),
        functions={str(k): _text(v, f"Keys.functions.{k}") for k, v in functions_raw.items()},
    )
    return LocalSettings(values=values, http_port=port, keys=keys)


def load_local_settings(path: Path | None) -> LocalSettings:
    """The file at ``path``; an absent file (or None) means no settings, as with Core Tools."""
    if path is None or not path.exists():
        return LocalSettings()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LocalSettingsError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise LocalSettingsError(f"{path}: the top level must be a JSON object")
    return parse_local_settings(raw)
