"""The endpoints a running devhost listens on, recorded in its data directory for command-line tools.

``python -m devhost --data-dir DIR`` (``make run``: ``.data/devhost``) writes ``DIR/endpoints.json`` once
the host runs and removes it when the host stops::

    {
        "pid": 4242,
        "http": "http://127.0.0.1:7071",
        "settings": {"ServiceBusConnection": "Endpoint=sb://127.0.0.1:5672;...", ...},
        "admin": {
            "adminConnectionString": "Endpoint=sb://localhost:5301;...",
            "managementTls": "https://localhost:5301",
            "managementCaFile": "/path/to/.data/emulator/management-ca.pem"
        },
        "storage": {
            "blob": "http://127.0.0.1:10000/devstoreaccount1",
            "queue": "http://127.0.0.1:10001/devstoreaccount1",
            "table": "http://127.0.0.1:10002/devstoreaccount1"
        }
    }

``http`` is the base URL of the HTTP triggers and admin endpoints; ``settings`` are the app settings that
point at the embedded emulator (connection string with its AMQP port, management endpoint with its port,
token, namespace) and, when devhost runs Azurite (``--with-azurite``), ``AzureWebJobsStorage`` with its
ports. Tools started beside the app (``shared.local_settings``) take these over the
local.settings.json values meant for a local emulator, so they reach the app whatever ports it uses.
``admin`` says where ``ServiceBusAdministrationClient`` reaches the emulator (it always speaks HTTPS): the
connection string for ``from_connection_string``, the HTTPS management URL and the CA file to trust; it
is empty when the emulator serves no HTTPS (``--no-management-tls``) or devhost runs without one. These are
not app settings, so tools reading ``settings`` never take them for one. Neither is ``storage``: the URL of
each Azurite service (development account included), empty when devhost runs no Azurite.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

RECORD_NAME = "endpoints.json"


def write_record(
    data_dir: Path,
    http_base_url: str,
    settings: Mapping[str, str],
    admin: Mapping[str, str] | None = None,
    storage: Mapping[str, str] | None = None,
) -> Path:
    """Write the record (whole or not at all; owner-readable only: it holds the emulator's token)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / RECORD_NAME
    partial = data_dir / f".{RECORD_NAME}.tmp"
    document = {
        "pid": os.getpid(),
        "http": http_base_url,
        "settings": dict(settings),
        "admin": dict(admin or {}),
        "storage": dict(storage or {}),
    }
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
    partial.replace(path)
    return path


def remove_record(data_dir: Path) -> None:
    """Remove the record if this process wrote it (another devhost may have started on the same data)."""
    path = data_dir / RECORD_NAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(document, dict) and document.get("pid") == os.getpid():
        path.unlink(missing_ok=True)
