"""HTTP keys kept across restarts in a secrets folder, as the Functions host keeps them in its storage.

In Azure the host creates its keys once and keeps them (``AzureWebJobsSecretStorageType``: blob storage by
default, or files, ``FileSystemSecretsRepository``), so a key stays valid across restarts. devhost does the
same in a folder of the app's data (``make run``: ``.data/devhost/secrets``), in the host's file layout:

* ``host.json``: ``{"masterKey": {"name": "master", "value": ...}, "functionKeys": [{"name": "default",
  "value": ...}]}``;
* ``<function name, lower case>.json``: ``{"keys": [{"name": "default", "value": ...}]}``.

Keys are created on first use and read back afterwards; keys fixed in local.settings.json (``Keys``) win
over the stored ones and are not written (remove them from the file and the stored keys apply again).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from devhost.local_settings import ConfiguredKeys

HOST_FILE = "host.json"
MASTER_NAME = "master"
DEFAULT_NAME = "default"


class KeyStoreError(ValueError):
    """A secrets file cannot be read as the host's key format."""


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise KeyStoreError(f"{path}: not valid JSON ({exc}); delete it to get new keys") from exc
    if not isinstance(document, dict):
        raise KeyStoreError(f"{path}: the top level must be a JSON object; delete it to get new keys")
    return document


def _write(path: Path, document: dict[str, Any]) -> None:
    """Whole file or nothing (a crash mid-write must not leave a half key file), readable by the owner."""
    partial = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
    partial.replace(path)


def _key_value(entry: Any, path: Path) -> str | None:
    if entry is None:
        return None
    value = entry.get("value") if isinstance(entry, dict) else None
    if not isinstance(value, str) or not value or entry.get("encrypted"):
        raise KeyStoreError(f"{path}: a key must be an unencrypted {{'name', 'value'}} object")
    return value


def _default_of(keys: Any, path: Path) -> str | None:
    if keys is None:
        return None
    if not isinstance(keys, list):
        raise KeyStoreError(f"{path}: keys must be a list")
    for entry in keys:
        if isinstance(entry, dict) and entry.get("name") == DEFAULT_NAME:
            return _key_value(entry, path)
    return None


def _others(keys: Any) -> list[Any]:
    """The named keys besides ``default`` (kept as they are when the default one is added)."""
    return [k for k in keys or [] if not (isinstance(k, dict) and k.get("name") == DEFAULT_NAME)]


def _entry(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value, "encrypted": False}


class KeyStore:
    """The secrets folder of one app."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def host_keys(self) -> tuple[str | None, str | None]:
        """The kept master and host keys (``None`` for one not created yet); reads, never writes."""
        host_path = self.directory / HOST_FILE
        document = _read(host_path)
        return _key_value(document.get("masterKey"), host_path), _default_of(
            document.get("functionKeys"), host_path
        )

    def resolve(
        self, configured: ConfiguredKeys, function_names: Iterable[str], generate: Callable[[], str]
    ) -> ConfiguredKeys:
        """Every key the host needs: configured, else stored, else generated now and stored."""
        self.directory.mkdir(parents=True, exist_ok=True)
        host_path = self.directory / HOST_FILE
        host_document = _read(host_path)
        master = _key_value(host_document.get("masterKey"), host_path)
        host = _default_of(host_document.get("functionKeys"), host_path)
        if (master is None and configured.master is None) or (host is None and configured.host is None):
            master = master or generate()
            host = host or generate()
            host_document["masterKey"] = _entry(MASTER_NAME, master)
            others = _others(host_document.get("functionKeys"))
            host_document["functionKeys"] = [_entry(DEFAULT_NAME, host), *others]
            _write(host_path, host_document)
        functions: dict[str, str] = {}
        for name in function_names:
            if configured.functions.get(name):
                functions[name] = configured.functions[name]
                continue
            path = self.directory / f"{name.lower()}.json"
            document = _read(path)
            key = _default_of(document.get("keys"), path)
            if key is None:
                key = generate()
                others = _others(document.get("keys"))
                document["keys"] = [_entry(DEFAULT_NAME, key), *others]
                _write(path, document)
            functions[name] = key
        return ConfiguredKeys(
            master=configured.master or master, host=configured.host or host, functions=functions
        )
