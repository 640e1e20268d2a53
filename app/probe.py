"""A test probe: a durable record of every event the sample handlers handled (``BUSBAR_PROBE_RECORD``).

The chaos run (``bench/chaos.py``) kills the worker and the whole host while events flow, then accounts for
every accepted event per subscriber; the end-to-end tests (``tests/functions``) read what the handlers did
from outside the worker process. The in-memory :data:`~app.endpoints.sample.JOURNAL` lives and dies in
that process, so when ``BUSBAR_PROBE_RECORD`` names a file each handled event is also appended to it as
one JSON line and fsynced before the handler returns, that is before its message is completed: a line in
the file proves the handler ran to its end at least once. Unset (or ``off``): no record, no cost.

It is a probe, not logic: nothing in the app reads the file back.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from shared.app_settings import AppSetting, read

PROBE_RECORD = AppSetting(
    "BUSBAR_PROBE_RECORD",
    "Local only, a test probe: a file the sample handlers append one JSON line to per handled event "
    "(fsynced before the message is completed), read by bench/chaos.py. Unset or 'off': no record.",
    local_only=True,
)

SETTINGS: tuple[AppSetting, ...] = (PROBE_RECORD,)

OFF = "off"

_lock = threading.Lock()


def record_path(env: Mapping[str, str] | None = None) -> str | None:
    """The record file the settings name, or None when the probe is off."""
    value = read(PROBE_RECORD, os.environ if env is None else env)
    if value is None or value.lower() == OFF:
        return None
    return value


def record(entry: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """Append ``entry`` (with the time and this process's id) to the record file, if the probe is on.

    One ``write`` of one line to a file opened with ``O_APPEND``, then ``fsync``: lines from several threads
    or worker processes never interleave, and a line is on disk before the caller goes on.
    """
    path = record_path(env)
    if path is None:
        return
    line = json.dumps({**entry, "at": time.time(), "pid": os.getpid()}, sort_keys=True) + "\n"
    with _lock:
        append_line(path, line)


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """Append ``line`` to ``path`` in one write (O_APPEND: writers in several processes never interleave),
    on disk before it returns."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
