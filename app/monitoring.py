"""This process's monitoring record (:mod:`shared.monitoring`): one recorder per worker process, flushed by a
background thread into the app's storage account (``AzureWebJobsStorage``, table
:data:`~shared.monitoring.table.TABLE_NAME`), under an id of its own.

The flusher starts with the first invocation recorded, so a process that never handles a message (the
console's, a test importing the app) starts no thread. The table client is built on the flusher's thread at
its first write: missing or unreachable storage is logged there (and the numbers kept for a later flush),
never raised into an invocation.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Mapping

from app.runtime import cached, environment
from shared.monitoring.flusher import Flusher
from shared.monitoring.recorder import Pending, Recorder
from shared.monitoring.table import MonitoringTable, monitoring_table_from_settings
from shared.storage_tables import storage_identity

INSTANCE = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"
"""This process's id in the table's row keys: the host name tells instances apart, the process id and a
random part a restarted worker (whose fresh counts must not replace its predecessor's row of the minute)."""

_lock = threading.Lock()
_flusher: Flusher | None = None


def monitoring_table(env: Mapping[str, str] | None = None) -> MonitoringTable:
    """The cached monitoring table of the storage account ``AzureWebJobsStorage`` names (in the app's one
    cache of clients, :func:`app.runtime.cached`)."""
    values = environment() if env is None else env
    return cached(
        ("monitoring-table", *storage_identity(values)), lambda: monitoring_table_from_settings(values)
    )


def _write(items: list[Pending]) -> None:
    monitoring_table().write(INSTANCE, items)


def recorder() -> Recorder:
    """This process's recorder, its flusher started on first use."""
    global _flusher
    with _lock:
        if _flusher is None:
            flusher = Flusher(Recorder(), _write)
            flusher.recorder.on_new_minute = flusher.wake
            flusher.start()
            _flusher = flusher
        return _flusher.recorder
